import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyEnvFiles, resolveEnvFiles } from '../../src/config/env-files.ts';
import { ConfigError } from '../../src/config/gateway-config.ts';

describe('settings from files (NAME_FILE)', () => {
  let dir: string;
  const file = (name: string, content: string) => {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  };
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'env-files-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the gateway settings from their files, trailing line breaks removed, and drops the _FILE entries', () => {
    const env = resolveEnvFiles({
      GATEWAY_ADMIN_TOKEN_FILE: file('token', 'a'.repeat(40) + '\n'),
      REDIS_URL_FILE: file('redis', 'redis://redis:6379\r\n'),
      ALPHA_API_KEY_FILE: file('alpha', 'upstream secret'),
      PORT: '8080',
    });
    expect(env).to.deep.equal({
      GATEWAY_ADMIN_TOKEN: 'a'.repeat(40),
      REDIS_URL: 'redis://redis:6379',
      ALPHA_API_KEY: 'upstream secret',
      PORT: '8080',
    });
  });

  it('leaves other _FILE variables of the environment alone', () => {
    const env = resolveEnvFiles({ COMPOSE_FILE: '/nowhere/compose.yaml', LOG_FILE: '/nowhere/log' });
    expect(env).to.deep.equal({ COMPOSE_FILE: '/nowhere/compose.yaml', LOG_FILE: '/nowhere/log' });
  });

  it('refuses both forms, an unreadable file and an empty one, naming variable and path, never the content', () => {
    const secret = 'sk-' + 'x'.repeat(40);
    const both = file('keys', secret);
    let caught: unknown;
    try {
      resolveEnvFiles({
        GATEWAY_API_KEYS: secret,
        GATEWAY_API_KEYS_FILE: both,
        GATEWAY_ADMIN_TOKEN_FILE: join(dir, 'missing'),
        REDIS_URL_FILE: file('empty', '\n'),
      });
    } catch (error) {
      caught = error;
    }
    expect(caught).to.be.instanceOf(ConfigError);
    const problems = (caught as ConfigError).problems;
    expect(problems).to.deep.equal([
      'set GATEWAY_API_KEYS or GATEWAY_API_KEYS_FILE, not both',
      `GATEWAY_ADMIN_TOKEN_FILE: cannot read ${join(dir, 'missing')} (ENOENT)`,
      `REDIS_URL_FILE: ${join(dir, 'empty')} is empty`,
    ]);
    expect(problems.join('\n')).not.to.include(secret);
  });

  it('applies in place, so that worker processes inherit the value and not the file name', () => {
    const env: NodeJS.ProcessEnv = { GATEWAY_KEY_ID_SECRET_FILE: file('id', 's'.repeat(32)), HOME: '/home' };
    applyEnvFiles(env);
    expect(env).to.deep.equal({ GATEWAY_KEY_ID_SECRET: 's'.repeat(32), HOME: '/home' });
    applyEnvFiles(env);
    expect(env).to.deep.equal({ GATEWAY_KEY_ID_SECRET: 's'.repeat(32), HOME: '/home' });
  });

  describe('a directory of them (GATEWAY_ENV_DIR)', () => {
    /** A Secret volume as kubelet lays it out: each key a link into `..data`, itself a link to the current version. */
    const secretVolume = (values: Record<string, string>) => {
      const volume = join(dir, 'secret');
      const version = join(volume, '..2026_12_01_10_00_00.000000001');
      mkdirSync(version, { recursive: true });
      symlinkSync('..2026_12_01_10_00_00.000000001', join(volume, '..data'));
      for (const [key, value] of Object.entries(values)) {
        writeFileSync(join(version, key), value);
        symlinkSync(join('..data', key), join(volume, key));
      }
      return volume;
    };

    it('gives each setting its file names, as NAME_FILE would, unless the environment sets it', () => {
      const volume = secretVolume({
        REDIS_URL: 'redis://:pw@redis:6379\n',
        GATEWAY_ADMIN_TOKEN: 'a'.repeat(40),
        ALPHA_API_KEY: 'from-dir',
        BETA_API_KEY: 'from-dir',
      });
      const env = resolveEnvFiles({
        GATEWAY_ENV_DIR: volume,
        ALPHA_API_KEY: 'from-env',
        BETA_API_KEY_FILE: file('beta', 'from-file'),
        PORT: '8080',
      });
      expect(env).to.deep.equal({
        REDIS_URL: 'redis://:pw@redis:6379',
        GATEWAY_ADMIN_TOKEN: 'a'.repeat(40),
        ALPHA_API_KEY: 'from-env',
        BETA_API_KEY: 'from-file',
        PORT: '8080',
      });
    });

    it('refuses a misnamed or empty file and a missing directory, never quoting a value', () => {
      const volume = secretVolume({
        REDIS_ULR: 'redis://:secret-value@redis:6379',
        GATEWAY_API_KEYS: '\n',
        LOG_LEVEL: 'debug',
      });
      const problemsOf = (env: NodeJS.ProcessEnv) => {
        try {
          resolveEnvFiles(env);
        } catch (error) {
          expect(error).to.be.instanceOf(ConfigError);
          return (error as ConfigError).problems;
        }
        return [];
      };
      const problems = problemsOf({ GATEWAY_ENV_DIR: volume });
      expect(problems).to.deep.equal([
        `GATEWAY_ENV_DIR: ${join(volume, 'GATEWAY_API_KEYS')} is empty`,
        `GATEWAY_ENV_DIR: ${join(volume, 'LOG_LEVEL')} is not named like a setting that can come from a file`,
        `GATEWAY_ENV_DIR: ${join(volume, 'REDIS_ULR')} is not named like a setting that can come from a file`,
      ]);
      expect(problems.join('\n')).not.to.include('secret-value');
      expect(problemsOf({ GATEWAY_ENV_DIR: join(dir, 'nowhere') })).to.deep.equal([
        `GATEWAY_ENV_DIR: cannot read the directory ${join(dir, 'nowhere')} (ENOENT)`,
      ]);
    });
  });
});
