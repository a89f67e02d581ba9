import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';
import { packageRoot } from '../core/package.js';

/**
 * The repository's sources and their imports, as the import checks (core/boundaries.test.ts,
 * core/cycles.test.ts) read them. Imports are read with TypeScript's own scanner
 * (`preProcessFile`) rather than a regex: it takes multi-line and type-only imports, `export …
 * from` and `import()` in any expression, and skips what only looks like an import inside a
 * comment or a string.
 */

export interface Import {
  specifier: string;
  line: number;
  dynamic: boolean;
}

/** Every module specifier `source` imports or re-exports, with its line (1-based). */
export function importsOf(source: string): Import[] {
  return ts.preProcessFile(source, true, true).importedFiles.map((file) => {
    const before = source.slice(0, file.pos);
    return { specifier: file.fileName, line: before.split('\n').length, dynamic: /\bimport\s*\(\s*$/.test(before) };
  });
}

/** Every `.ts` file under src/: its path relative to the repository → its source. */
export function sourceFiles(): Map<string, string> {
  const root = packageRoot();
  const files = new Map<string, string>();
  for (const entry of readdirSync(join(root, 'src'), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(relative(root, path), readFileSync(path, 'utf8'));
  }
  return files;
}

/** The repository path a relative specifier in `file` names (`./x.js` → `src/tool/x.ts`); undefined for a package. */
export function importedPath(file: string, specifier: string): string | undefined {
  return specifier.startsWith('.') ? join(dirname(file), specifier).replace(/\.js$/, '.ts') : undefined;
}
