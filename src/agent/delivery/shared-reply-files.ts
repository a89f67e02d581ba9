import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClawError } from '../../core/errors.js';
import { ensureDir } from '../../core/home.js';
import { AGENT_FILES_DIR, deliveriesDir } from '../../core/layout.js';
import type { Attachment } from '../../core/message.js';
import { SHARED_FILE_DAYS, type ThreadStore } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { threadStore } from '../threads.js';
import { ownFile } from './attachments.js';
import { MAX_REPLY_FILE_BYTES } from './reply-files.js';

/**
 * A reply's files on a store shared by hosts: the reply is delivered by the host that owns its
 * channel, which may not hold the agent's directory. So the agent's host puts each file into the
 * store (thread/store/shared-files.ts) when it takes them into the reply, before the reply is in
 * its thread; a deliverer without the directory reads them from there into its home's
 * `deliveries/files/`, under the same name as in the agent's `files/`, and hands xgw that copy
 * (the web chat serves it from there later, so it is kept like the agent's `files/`). SQLite has
 * one host: nothing is copied.
 */
export async function shareReplyFiles(home: string, dir: AgentDir, attachments: readonly Attachment[], env: NodeJS.ProcessEnv): Promise<void> {
  if (attachments.length === 0) return;
  const files = (await threadStore(home, env)).files;
  if (!files) return;
  for (const attachment of attachments) {
    const path = ownFile(dir, attachment);
    if (path !== undefined) await files.put(readFileSync(path));
  }
}

/** `files/<sha256>.<ext>`, as core/agent-files.ts names a file. */
const STORED_NAME = /^files\/([0-9a-f]{64})(\.[a-z0-9]{1,8})?$/;

/** A reply's file from the store, as a file of this home (see above). Returns its path. */
export async function fetchReplyFile(home: string, store: ThreadStore, attachment: Attachment): Promise<string> {
  const match = attachment.path === undefined ? null : STORED_NAME.exec(attachment.path);
  const what = `the reply's file ${JSON.stringify(attachment.name ?? attachment.path ?? '')}`;
  if (!match) throw new ClawError('invalid', `${what} is not one of the agent's stored files, so it cannot be sent from another host`, { suggestion: 'attach files with agent attach' });
  const folder = join(deliveriesDir(home), AGENT_FILES_DIR);
  const path = join(folder, attachment.path!.slice(AGENT_FILES_DIR.length + 1));
  if (existsSync(path)) return path; // named by its content: a copy here is the file
  const bytes = await store.files?.get(match[1]!);
  if (!bytes || bytes.length > MAX_REPLY_FILE_BYTES) {
    throw new ClawError('not_found', `${what} is not in ${store.location}`, {
      suggestion: `the store keeps a reply's files ${SHARED_FILE_DAYS} days after the reply: ask the agent for the file again`,
    });
  }
  ensureDir(folder);
  const partial = `${path}.${process.pid}.tmp`;
  writeFileSync(partial, bytes, { mode: 0o600 });
  renameSync(partial, path);
  return path;
}
