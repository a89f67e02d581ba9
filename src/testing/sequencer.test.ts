import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TestSpecification } from 'vitest/node';
import { packageRoot } from '../core/package.js';
import LongestFirst, { DURATIONS_FILE } from './sequencer.js';

describe('the test files’ order', () => {
  const root = packageRoot();
  const sort = async (files: string[]) => {
    const sequencer = new LongestFirst({ config: { root } } as ConstructorParameters<typeof LongestFirst>[0]);
    const sorted = await sequencer.sort(files.map((file) => ({ moduleId: join(root, file) }) as TestSpecification));
    return sorted.map((spec) => spec.moduleId.slice(root.length + 1));
  };

  it('starts the longest of the last full run first, and a file it has no figure for before them', async () => {
    const durations = JSON.parse(readFileSync(DURATIONS_FILE, 'utf8')) as Record<string, number>;
    const [longest, second] = Object.keys(durations) as [string, string];
    expect(durations[longest]).toBeGreaterThan(durations[second]!);
    expect(await sort(['src/core/reference.test.ts', second, 'src/testing/sequencer.test.ts', longest])).toEqual(['src/testing/sequencer.test.ts', longest, second, 'src/core/reference.test.ts']);
  });
});
