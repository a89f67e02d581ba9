import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

/**
 * The package's root directory. Found by walking up from this module, because bundling moves
 * shared code into chunks at other depths than its source file had.
 */
export function packageRoot(): string {
  if (root) return root;
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'theclaw') {
      root = dir;
      return dir;
    }
    if (dirname(dir) === dir) throw new Error('cannot find the theclaw package root');
  }
}

/** The built CLI of a tool (`dist/<tool>/cli.js`), run with the current Node. */
export function cliPath(tool: string): string {
  return join(packageRoot(), 'dist', tool, 'cli.js');
}

/** The tools package.json installs as commands (its `bin`), in its order. */
export function binNames(): string[] {
  const manifest = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { bin?: Record<string, string> };
  return Object.keys(manifest.bin ?? {});
}
