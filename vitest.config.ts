import { defineConfig } from 'vitest/config';
import LongestFirst from './src/testing/sequencer.js';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    // Integration tests start real daemons and processes; two cores are shared between files.
    pool: 'forks',
    maxWorkers: 2,
    // A worker runs its files one after another with the modules it loaded for the first kept:
    // each file would spend about a second of CPU importing them again (a third of the suite's
    // import time). So a test file leaves the process as it found it: it restores what it spies on,
    // the environment variables it sets and the listeners it adds.
    isolate: false,
    setupFiles: ['src/testing/process-state.ts'],
    // The longest files first, from the last full run's durations (src/testing/sequencer.ts).
    sequence: { sequencer: LongestFirst },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
