// npm run test:durations: after a full `npm test`, writes what each test file took (vitest's own
// record of the run) to src/testing/test-durations.json, which orders the files of the next runs
// (src/testing/sequencer.ts). Run it on a quiet machine: the order is only as good as the figures.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DURATIONS_FILE } from '../src/testing/sequencer.js';

const cache = join(import.meta.dirname, '..', 'node_modules', '.vite', 'vitest');
const [dir] = readdirSync(cache);
if (!dir) throw new Error(`no record of a run in ${cache} - run npm test first`);
const { results } = JSON.parse(readFileSync(join(cache, dir, 'results.json'), 'utf8')) as { results: [string, { duration: number }][] };
const seconds = results.map(([key, { duration }]) => [key.slice(key.indexOf(':') + 1), Math.round(duration / 100) / 10] as const).sort((a, b) => b[1] - a[1]);
writeFileSync(DURATIONS_FILE, `${JSON.stringify(Object.fromEntries(seconds), null, 2)}\n`);
console.log(`${seconds.length} test files' durations written to ${DURATIONS_FILE}`);
