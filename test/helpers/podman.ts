import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Why the container tests cannot run on this machine, or undefined when they can. */
export function containerSupport(): string | undefined {
  if (process.env.GATEWAY_SKIP_CONTAINER_TESTS === '1') return 'GATEWAY_SKIP_CONTAINER_TESTS=1';
  if (process.platform !== 'linux') return `containers need Linux, this is ${process.platform}`;
  if (process.getuid?.() !== 0) return 'containers are built with rootful podman: run npm test as root';
  for (const tool of ['podman', 'podman-compose', 'debootstrap', 'runc']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0)
      return `${tool} is not installed (npm test as root installs it: scripts/test-setup.sh)`;
  }
  return undefined;
}

export interface Outcome {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The containers.conf the project ships for hosts like these (docs/deploy.md). */
const SHIPPED_CONF = join(import.meta.dirname, '..', '..', 'deploy', 'podman', 'containers.conf');

/**
 * podman as the tests use it, with a private containers.conf (`CONTAINERS_CONF`), nothing under /etc
 * changed: the shipped deploy/podman/containers.conf (runc rather than crun, which refuses hybrid
 * cgroups; cgroupfs without systemd), with explicit ulimits no higher than this machine's own hard
 * limits added (podman's defaults are higher, and raising a limit is refused here).
 */
export class Podman {
  readonly env: NodeJS.ProcessEnv;

  constructor() {
    const dir = mkdtempSync(join(tmpdir(), 'podman-conf-'));
    // `unlimited` reads as NaN: then podman's own figure stands (nofile), or the cap (nproc).
    const hard = (flag: string, otherwise: number) => {
      const limit = Number(execFileSync('bash', ['-c', `ulimit -H${flag}`], { encoding: 'utf8' }).trim());
      return Number.isFinite(limit) ? limit : otherwise;
    };
    const nofile = hard('n', 65_536);
    const nproc = Math.min(hard('u', 4096), 4096);
    const conf = join(dir, 'containers.conf');
    const shipped = readFileSync(SHIPPED_CONF, 'utf8');
    if (!shipped.includes('\n[containers]\n')) throw new Error(`${SHIPPED_CONF} has no [containers] table`);
    writeFileSync(
      conf,
      shipped.replace(
        '\n[containers]\n',
        `\n[containers]\ndefault_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]\n`,
      ),
    );
    this.env = { ...process.env, CONTAINERS_CONF: conf };
  }

  /** Runs `command` (podman by default) and gives back its outcome, whatever the exit code. */
  run(
    args: readonly string[],
    options: { command?: string; env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {},
  ): Promise<Outcome> {
    return new Promise((resolve) => {
      execFile(
        options.command ?? 'podman',
        args,
        {
          env: { ...this.env, ...options.env },
          cwd: options.cwd,
          timeout: options.timeoutMs ?? 600_000,
          maxBuffer: 64 * 1024 * 1024,
          encoding: 'utf8',
        },
        (error, stdout, stderr) => {
          const code = error
            ? typeof (error as { code?: unknown }).code === 'number'
              ? (error as { code: number }).code
              : 1
            : 0;
          resolve({ code, stdout, stderr });
        },
      );
    });
  }

  /** Like {@link run}, but fails with the command's own output unless it exits 0; gives back stdout. */
  async must(args: readonly string[], options: Parameters<Podman['run']>[1] = {}): Promise<string> {
    const outcome = await this.run(args, options);
    if (outcome.code !== 0) {
      throw new Error(
        `${options.command ?? 'podman'} ${args.join(' ')} exited ${outcome.code}:\n${outcome.stderr.slice(-4000)}${outcome.stdout.slice(-2000)}`,
      );
    }
    return outcome.stdout;
  }
}
