#!/usr/bin/env node
// The operator CLI (keys, teams, usage, config check, plugin new|test) on the same store as the server; see
// `model-gateway help`. Runs the compiled build (`npm run build`); in a checkout without one, the
// source under tsx (a development dependency).
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/src/cli/main.js', import.meta.url);
let cli;
if (existsSync(compiled)) {
  cli = await import(compiled.href);
} else {
  try {
    (await import('tsx/esm/api')).register();
  } catch {
    process.stderr.write('model-gateway: no compiled build: run `npm run build` first\n');
    process.exit(1);
  }
  cli = await import('../src/cli/main.ts');
}
process.exitCode = await cli.runCli(process.argv.slice(2));
