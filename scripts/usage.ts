/**
 * `npm run usage`: writes every tool's src/<tool>/USAGE.md from its built CLI. The tools are
 * package.json's `bin`, so a new tool gets its USAGE.md (and its staleness test) with its bin.
 */
import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { binNames, packageRoot } from '../src/core/package.js';
import { renderUsage, usagePath } from '../src/core/usage.js';

for (const tool of binNames()) {
  writeFileSync(usagePath(tool), renderUsage(tool));
  process.stdout.write(`wrote ${relative(packageRoot(), usagePath(tool))}\n`);
}
