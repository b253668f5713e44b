/**
 * Which settings of an environment were read from files (`NAME_FILE`, see `env-files.ts`), so that a
 * problem with one names the file it came from as well as the variable; never the value.
 */
const fromFiles = new WeakMap<NodeJS.ProcessEnv, Map<string, string>>();

/** Notes that `name` in `env` holds the content of the file `path` (given as `NAME_FILE`). */
export function noteSettingFile(env: NodeJS.ProcessEnv, name: string, path: string): void {
  let files = fromFiles.get(env);
  if (!files) fromFiles.set(env, (files = new Map()));
  files.set(name, path);
}

/** How a problem names the setting: `REDIS_URL`, or `REDIS_URL (read from REDIS_URL_FILE, /run/secrets/redis_url)`. */
export function settingName(env: NodeJS.ProcessEnv, name: string): string {
  const path = fromFiles.get(env)?.get(name);
  return path === undefined ? name : `${name} (read from ${name}_FILE, ${path})`;
}
