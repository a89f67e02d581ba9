import { createHash } from 'node:crypto';
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { ensureDir } from '../core/home.js';
import { AGENT_FILES_DIR, agentsRoot } from '../core/layout.js';
import type { InboundFile } from './types.js';

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
 * Stores a file a person sent in the agent's `files/`, named by its SHA-256 (the same file sent
 * twice is kept once), written whole or not at all, private to the owner. Returns its path
 * relative to the agent's directory, as the message content keeps it: the home can move.
 */
export function storeFile(home: string, agent: string, bytes: Buffer, file: InboundFile): string {
  const dir = join(agentsRoot(home), agent, AGENT_FILES_DIR);
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

function extensionOf(file: InboundFile): string {
  const fromName = file.name ? extname(file.name).toLowerCase() : '';
  if (/^\.[a-z0-9]{1,8}$/.test(fromName)) return fromName;
  return EXTENSIONS[file.mime_type ?? ''] ?? '';
}
