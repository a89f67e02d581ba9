import { createHash } from 'node:crypto';
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { extname, join } from 'node:path';
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
 * An agent's files: what people send it (xgw stores them) and what it sends them (`agent
 * attach`), in its `files/`, each named by its SHA-256 (the same file twice is kept once),
 * written whole or not at all, private to the owner. Messages refer to them by their path relative to
 * the agent's directory (`files/<sha256>.<ext>`): the home can move.
 */
export function storeFile(home: string, agent: string, bytes: Buffer, file: FileKind): string {
  const dir = join(agentRoot(home, agent), AGENT_FILES_DIR);
  ensureDir(dir);
  const name = `${createHash('sha256').update(bytes).digest('hex')}${extensionOf(file)}`;
  const path = join(dir, name);
  if (!existsSync(path)) {
    const partial = `${path}.${process.pid}.tmp`;
    writeFileSync(partial, bytes, { mode: 0o600 });
    renameSync(partial, path);
  }
  return `${AGENT_FILES_DIR}/${name}`;
}

function extensionOf(file: FileKind): string {
  const fromName = file.name ? extname(file.name).toLowerCase() : '';
  if (/^\.[a-z0-9]{1,8}$/.test(fromName)) return fromName;
  return EXTENSIONS[file.mime_type ?? ''] ?? '';
}
