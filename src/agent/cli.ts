#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createAgentProgram } from './program.js';

// In a warm runner, what `agent run` and `agent deliver` load on first use is loaded ahead.
let warm = false;
await main(createAgentProgram, () => {
  warm = true;
  import('./run.js').then(
    ({ warmAgentRuns }) => warmAgentRuns(),
    () => {},
  );
  import('./delivery/deliver.js').catch(() => {});
});
// A process of its own leaves once the command is done: a PostgreSQL pool it opened must not keep
// it. A warm runner's stores serve its next jobs (threads.ts).
if (!warm) await (await import('./threads.js')).closeThreadStores();
