#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createAgentProgram } from './program.js';

// In a warm runner, what `agent run` and `agent deliver` load on first use is loaded ahead.
await main(createAgentProgram, () => {
  import('./run.js').then(
    ({ warmAgentRuns }) => warmAgentRuns(),
    () => {},
  );
  import('./delivery/deliver.js').catch(() => {});
});
