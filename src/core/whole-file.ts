import { randomBytes } from 'node:crypto';
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ensureDir } from './home.js';

/**
 * Writes a small state file whole or not at all (a temporary file renamed over it), mode 0600,
 * so that a reader in another process never sees half of it and two writers leave one's version.
 */
export function writeFileWhole(file: string, text: string): void {
  ensureDir(dirname(file));
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    writeFileSync(temp, text, { mode: 0o600 });
    renameSync(temp, file);
  } finally {
    rmSync(temp, { force: true });
  }
}
