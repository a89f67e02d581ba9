/**
 * `npm run usage`: writes every tool's src/<tool>/USAGE.md, and its copy docs/reference/<tool>.md,
 * from its built CLI, and the index of their commands that cmds reads (src/cmds/own-commands.json)
 * from their programs. The tools are package.json's `bin`, so a new tool gets its USAGE.md (and its
 * staleness test) with its bin; its program goes in src/testing/programs.ts.
 */
import { writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { renderOwnCommands } from '../src/cmds/own-commands.js';
import { binNames, packageRoot } from '../src/core/package.js';
import { referencePath, renderUsage, usagePath } from '../src/core/usage.js';
import { buildPrograms } from '../src/testing/programs.js';

const written = (path: string) => process.stdout.write(`wrote ${relative(packageRoot(), path)}\n`);

for (const tool of binNames()) {
  const usage = renderUsage(tool);
  for (const path of [usagePath(tool), referencePath(tool)]) {
    writeFileSync(path, usage);
    written(path);
  }
}
const ownCommandsPath = join(packageRoot(), 'src', 'cmds', 'own-commands.json');
writeFileSync(ownCommandsPath, renderOwnCommands(await buildPrograms()));
written(ownCommandsPath);
