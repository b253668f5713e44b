/**
 * Which settings of an environment were read from files (`NAME_FILE`, `GATEWAY_ENV_DIR`, see
 * `env-files.ts`), so that a problem with one names the file it came from as well as the variable;
 * never the value.
 */
const fromFiles = new WeakMap<NodeJS.ProcessEnv, Map<string, string>>();

/** Notes that `name` in `env` holds a file's content; `via` says which (`REDIS_URL_FILE, /run/secrets/redis_url`). */
export function noteSettingFile(env: NodeJS.ProcessEnv, name: string, via: string): void {
  let files = fromFiles.get(env);
  if (!files) fromFiles.set(env, (files = new Map()));
  files.set(name, via);
}

/** Notes in `to` the files the settings of `from` came from (an environment resolved into another). */
export function carrySettingFiles(from: NodeJS.ProcessEnv, to: NodeJS.ProcessEnv): void {
  for (const [name, via] of fromFiles.get(from) ?? []) noteSettingFile(to, name, via);
}

/** How a problem names a setting: `REDIS_URL`, or `REDIS_URL (read from REDIS_URL_FILE, /run/secrets/redis_url)`. */
export function settingName(env: NodeJS.ProcessEnv, name: string): string {
  const via = fromFiles.get(env)?.get(name);
  return via === undefined ? name : `${name} (read from ${via})`;
}
