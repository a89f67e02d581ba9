import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAddress } from '../../core/address.js';
import { storedFileHash, writeStoredFile } from '../../core/agent-files.js';
import { ClawError } from '../../core/errors.js';
import { deliveriesDir } from '../../core/layout.js';
import type { Logger } from '../../core/logger.js';
import { formatMessageContent, parseMessageContent, type Attachment, type MessageContent } from '../../core/message.js';
import { SHARED_FILE_DAYS, type SharedFiles, type ThreadStore } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { threadStore } from '../threads.js';
import { ownFile } from './attachments.js';

/**
 * Files between a person and an agent on a store shared by hosts (thread/store/shared-files.ts),
 * where the agent's directory may be on another host than its channel's gateway. Both ways a file
 * is put into the store by the host that has it and copied out, by its name (`files/<sha256>.<ext>`,
 * core/agent-files.ts), into the other host's home, where it is then read as on one host:
 * - a reply's files: the agent's host puts each into the store when it takes them into the reply,
 *   before the reply is in its thread; a deliverer without the directory copies them into its
 *   home's `deliveries/files/` and hands xgw that copy (the web chat serves it from there later,
 *   so it is kept like the agent's `files/`);
 * - a person's files: the gateway that took them put them into the store and named them in the
 *   message (xgw/inbound.ts); the agent's host copies them into the agent's `files/` before the
 *   turn reads the message (its transcription, the model's input, the sandbox's binds).
 * What is copied is only ever a stored file's name, checked against its hash and no larger than
 * the store gives (`MAX_SHARED_FILE_BYTES`), into a folder of this home: a message cannot name a
 * path on the host or a file the store does not hold. SQLite has one host: nothing is copied.
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

/** A reply's file from the store, as a file of this home (see above). Returns its path. */
export async function fetchReplyFile(home: string, store: ThreadStore, attachment: Attachment): Promise<string> {
  const what = `the reply's file ${JSON.stringify(attachment.name ?? attachment.path ?? '')}`;
  if (storedFileHash(attachment.path) === null) {
    throw new ClawError('invalid', `${what} is not one of the agent's stored files, so it cannot be sent from another host`, { suggestion: 'attach files with agent attach' });
  }
  const path = store.files && (await copyFromStore(store.files, deliveriesDir(home), attachment.path!));
  if (!path) {
    throw new ClawError('not_found', `${what} is not in ${store.location}`, {
      suggestion: `the store keeps a reply's files ${SHARED_FILE_DAYS} days after the reply: ask the agent for the file again`,
    });
  }
  return path;
}

/**
 * A person's message (its inbox event's `content`) with its files in the agent's `files/` (see
 * above). Returns the content to keep: as it came, except that a file the store does not hold
 * (the message waited more than SHARED_FILE_DAYS for its turn) loses its path, so that the turn
 * says it did not come rather than name a file that is not there. Only a message from a person
 * (an external source, which gateways push) has its files fetched: no other message carries any.
 */
export async function receiveFiles(home: string, dir: AgentDir, event: { source: string; content: string }, env: NodeJS.ProcessEnv, logger: Logger): Promise<string> {
  const files = (await threadStore(home, env)).files;
  if (!files || !fromPerson(event.source)) return event.content;
  let message: MessageContent;
  try {
    message = parseMessageContent(event.content);
  } catch {
    return event.content; // plain text pushed by hand
  }
  let lost = false;
  const attachments: Attachment[] = [];
  for (const attachment of message.attachments) {
    if (storedFileHash(attachment.path) === null || (await copyFromStore(files, dir.root, attachment.path!)) !== null) {
      attachments.push(attachment);
      continue;
    }
    logger.warn(`run: ${attachment.path} (a file the person sent) is not in the store any more: the turn is told it did not come`);
    lost = true;
    const { path: _lost, ...rest } = attachment;
    attachments.push(rest);
  }
  return lost ? formatMessageContent({ ...message, attachments }) : event.content;
}

/**
 * The stored file `stored` names (`files/<sha256>.<ext>`, checked by the caller) under `root`,
 * copied from the store when it is not there yet; null when the store holds none of that hash.
 */
async function copyFromStore(files: SharedFiles, root: string, stored: string): Promise<string | null> {
  const path = join(root, stored);
  if (existsSync(path)) return path; // named by its content: a copy here is the file
  const bytes = await files.get(storedFileHash(stored)!);
  return bytes && writeStoredFile(root, stored, bytes);
}

function fromPerson(source: string): boolean {
  try {
    return parseAddress(source).kind === 'external';
  } catch {
    return false;
  }
}
