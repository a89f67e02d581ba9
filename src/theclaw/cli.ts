#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createTheclawProgram } from './program.js';

let warm = false;
await main(createTheclawProgram, () => {
  warm = true;
});
// A process of its own leaves once the command is done: a PostgreSQL pool that status, prune or a
// sweep opened must not keep it. A warm runner's stores serve its next jobs (agent/threads.ts).
if (!warm) await (await import('../agent/threads.js')).closeThreadStores();
