import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from './gateway-config.ts';
import { carrySettingFiles, noteSettingFile } from './setting-sources.ts';

const FILE_SUFFIX = '_FILE';
/** A directory whose files, each named like a setting, give those settings (a Kubernetes Secret volume). */
const ENV_DIR = 'GATEWAY_ENV_DIR';
/** The settings that may be given as files: the ones that hold secrets or addresses of secrets. */
const FROM_FILE = /^(?:REDIS_URL|GATEWAY_[A-Z0-9_]+|[A-Z][A-Z0-9_]*_API_KEY|[A-Z][A-Z0-9_]*_BASE_URL)$/;

/**
 * The gateway's own settings (`REDIS_URL`, `GATEWAY_*`, `<VENDOR>_API_KEY`, `<VENDOR>_BASE_URL`) can
 * come from files instead, as container secrets are mounted
 * (`GATEWAY_ADMIN_TOKEN_FILE=/run/secrets/admin_token`): for each `NAME_FILE`, the file's content,
 * trailing line breaks and spaces removed, becomes `NAME`. Gives back a new environment without the
 * `_FILE` entries, so that processes started from it (workers) see the value once. Setting both `NAME`
 * (not empty: compose passes unset variables as empty) and `NAME_FILE`, a file that cannot be read, or an empty one is
 * refused, naming the variable and the path, never the content.
 */
export function resolveEnvFiles(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const resolved: NodeJS.ProcessEnv = { ...env };
  const problems: string[] = [];
  const read: [string, string][] = [];
  for (const [variable, path] of Object.entries(env)) {
    if (!variable.endsWith(FILE_SUFFIX) || variable.length === FILE_SUFFIX.length || path === undefined) continue;
    const name = variable.slice(0, -FILE_SUFFIX.length);
    if (!FROM_FILE.test(name)) continue;
    delete resolved[variable];
    if (env[name] !== undefined && env[name] !== '') {
      problems.push(`set ${name} or ${variable}, not both`);
      continue;
    }
    let content: string;
    try {
      content = readFileSync(path, 'utf8').replace(/[\r\n\t ]+$/, '');
    } catch (error) {
      problems.push(`${variable}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
      continue;
    }
    if (content === '') problems.push(`${variable}: ${path} is empty`);
    else {
      resolved[name] = content;
      read.push([name, `${variable}, ${path}`]);
    }
  }
  const dir = env[ENV_DIR];
  if (dir !== undefined && dir !== '') readEnvDir(dir, env, resolved, problems, read);
  if (problems.length > 0) throw new ConfigError(problems);
  for (const [name, via] of read) noteSettingFile(resolved, name, via);
  return resolved;
}

/**
 * `GATEWAY_ENV_DIR`: each file of the directory named like a setting that may come from a file
 * (`REDIS_URL`, `GATEWAY_ADMIN_TOKEN`, `ALPHA_API_KEY`, ...) gives that setting, as `NAME_FILE` would,
 * unless the environment sets `NAME` or `NAME_FILE` itself. Names starting with a dot are skipped (a
 * Kubernetes Secret volume keeps its `..data` links there); any other name is refused, so that a
 * misspelt key of a Secret does not go unnoticed.
 */
function readEnvDir(
  dir: string,
  env: NodeJS.ProcessEnv,
  resolved: NodeJS.ProcessEnv,
  problems: string[],
  read: [string, string][],
): void {
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((name) => !name.startsWith('.'))
      .sort();
  } catch (error) {
    problems.push(`${ENV_DIR}: cannot read the directory ${dir} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    return;
  }
  for (const name of names) {
    const path = join(dir, name);
    if (!FROM_FILE.test(name) || name === ENV_DIR) {
      problems.push(`${ENV_DIR}: ${path} is not named like a setting that can come from a file`);
      continue;
    }
    if ((env[name] !== undefined && env[name] !== '') || env[`${name}${FILE_SUFFIX}`] !== undefined) continue;
    let content: string;
    try {
      content = readFileSync(path, 'utf8').replace(/[\r\n\t ]+$/, '');
    } catch (error) {
      problems.push(`${ENV_DIR}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
      continue;
    }
    if (content === '') problems.push(`${ENV_DIR}: ${path} is empty`);
    else {
      resolved[name] = content;
      read.push([name, `${ENV_DIR}, ${path}`]);
    }
  }
  delete resolved[ENV_DIR];
}

/** {@link resolveEnvFiles} applied to this process's own environment, in place. */
export function applyEnvFiles(env: NodeJS.ProcessEnv = process.env): void {
  const resolved = resolveEnvFiles(env);
  for (const variable of Object.keys(env)) if (!(variable in resolved)) delete env[variable];
  Object.assign(env, resolved);
  carrySettingFiles(resolved, env);
}
