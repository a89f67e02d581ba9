import { createHash } from 'node:crypto';
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
import { ensureDir } from './home.js';
import { AGENT_FILES_DIR, agentRoot } from './layout.js';

/** What names a file's type: its own name's extension, else its MIME type. */
export interface FileKind {
  name?: string;
  mime_type?: string;
}

/** Extensions of the types people send most, for a file whose name does not say. */
const EXTENSIONS: Record<string, string> = {
  'image/jpeg': '.jpg',
  'image/png': '.png',
  'image/webp': '.webp',
  'image/gif': '.gif',
  'application/pdf': '.pdf',
  'text/plain': '.txt',
  'audio/mpeg': '.mp3',
  'audio/ogg': '.ogg',
  'video/mp4': '.mp4',
};

/**
 * An agent's files: what people send it (xgw stores them, or on a store shared by hosts its host
 * copies them from there: agent/delivery/shared-files.ts) and what it sends them (`agent
 * attach`), in its `files/`, each named by its SHA-256 (the same file twice is kept once),
 * written whole or not at all, private to the owner. Messages refer to them by their path relative to
 * the agent's directory (`files/<sha256>.<ext>`): the home can move.
 */
export function storeFile(home: string, agent: string, bytes: Buffer, file: FileKind): string {
  const stored = storedFilePath(createHash('sha256').update(bytes).digest('hex'), file);
  writeStoredFile(agentRoot(home, agent), stored, bytes);
  return stored;
}

/** The path relative to an agent's directory of the file of this SHA-256 (hex) and kind: `files/<sha256>.<ext>`. */
export function storedFilePath(sha256: string, file: FileKind): string {
  return `${AGENT_FILES_DIR}/${sha256}${extensionOf(file)}`;
}

const STORED_PATH = /^files\/([0-9a-f]{64})(\.[a-z0-9]{1,8})?$/;

/** The SHA-256 a path names when it is a stored file's (`storedFilePath`), else null: nothing else is. */
export function storedFileHash(path: string | undefined): string | null {
  return path === undefined ? null : (STORED_PATH.exec(path)?.[1] ?? null);
}

/**
 * Writes a stored file (`storedFilePath`, checked by the caller) under `root` (an agent's
 * directory, or the deliverer's `deliveries/`), whole or not at all; a copy there already is the
 * file, since its name is its content's. Returns its absolute path.
 */
export function writeStoredFile(root: string, stored: string, bytes: Buffer): string {
  const path = join(root, stored);
  if (!existsSync(path)) {
    ensureDir(dirname(path));
    const partial = `${path}.${process.pid}.tmp`;
    writeFileSync(partial, bytes, { mode: 0o600 });
    renameSync(partial, path);
  }
  return path;
}

function extensionOf(file: FileKind): string {
  const fromName = file.name ? extname(file.name).toLowerCase() : '';
  if (/^\.[a-z0-9]{1,8}$/.test(fromName)) return fromName;
  return EXTENSIONS[file.mime_type ?? ''] ?? '';
}
