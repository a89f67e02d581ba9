import { readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The order the test files start in (vitest.config.ts `sequence.sequencer`): the longest first, so
 * that the two workers, each taking the next file as it is free, end together. vitest orders by
 * its own record of the last run's durations, which a fresh clone (CI) does not have; it then
 * orders by file size, which put the 70 s chaos test after files of a few seconds. The durations
 * of the last full run are kept in test-durations.json (seconds per file; `npm run
 * test:durations` writes them anew from vitest's record after a full `npm test`). A file not
 * listed there (a new one) goes first, as vitest runs unknown files first, then by size.
 */
export const DURATIONS_FILE = join(import.meta.dirname, 'test-durations.json');

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const durations = JSON.parse(readFileSync(DURATIONS_FILE, 'utf8')) as Record<string, number>;
    const key = (file: TestSpecification) => relative(this.ctx.config.root, file.moduleId);
    const size = (file: TestSpecification) => statSync(file.moduleId).size;
    const rank = (file: TestSpecification) => durations[key(file)] ?? Number.POSITIVE_INFINITY;
    return [...files].sort((a, b) => rank(b) - rank(a) || size(b) - size(a));
  }
}
