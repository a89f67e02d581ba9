/**
 * `npm run usage`: writes every tool's src/<tool>/USAGE.md, and its copy docs/reference/<tool>.md,
 * from its built CLI. The tools are package.json's `bin`, so a new tool gets its USAGE.md (and its
 * staleness test) with its bin.
 */
import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { binNames, packageRoot } from '../src/core/package.js';
import { referencePath, renderUsage, usagePath } from '../src/core/usage.js';

for (const tool of binNames()) {
  const usage = renderUsage(tool);
  for (const path of [usagePath(tool), referencePath(tool)]) {
    writeFileSync(path, usage);
    process.stdout.write(`wrote ${relative(packageRoot(), path)}\n`);
  }
}
