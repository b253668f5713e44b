#!/usr/bin/env node
// The operator CLI (keys, usage) on the same store as the server; see `model-gateway help`.
import { register } from 'tsx/esm/api';

register();
const { runCli } = await import('../src/cli/main.ts');
process.exitCode = await runCli(process.argv.slice(2));
