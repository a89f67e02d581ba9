import { basename, isAbsolute, relative, resolve } from 'node:path';
import * as z from 'zod/mini';
import { storeFile } from '../../core/agent-files.js';
import { readContained, statContained } from '../../core/contained-fs.js';
import { ClawError } from '../../core/errors.js';
import { leaveRequest, takeRequests, turnOutbox } from '../../core/turn-outbox.js';
import { ATTACHMENT_KINDS, type Attachment, type AttachmentKind } from '../../core/message.js';
import { agentDir, type AgentDir } from '../agent-dir.js';
import { ATTACH_PREFIX, outboxDir } from '../policy/index.js';

/**
 * Files an agent sends with its answer: `agent attach <file>` in a turn's command leaves a
 * request in the conversation's outbox (the one place outside its own the sandbox may write),
 * and the runtime, outside the sandbox, takes the files into the answer it puts in the thread:
 * copied into the agent's `files/` (core/agent-files.ts), so what is delivered cannot change
 * after the turn. Only plain files in the agent's own directory are taken, read without following
 * a link (core/contained-fs.ts): a command could leave one to a file outside it, or swap one in.
 */

/** Largest file an answer carries (Telegram bots may send up to 50 MB). */
export const MAX_REPLY_FILE_BYTES = 50 * 1024 * 1024;

const AttachRequestSchema = z.strictObject({ path: z.string(), name: z.optional(z.string()) });

/** Inside a turn: checks the file, and leaves the request for the runtime. Returns the file's path. */
export function queueAttachment(home: string, file: string, name: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  const agent = env.THECLAW_AGENT;
  const conversation = env.THECLAW_CONVERSATION;
  if (!agent || !conversation)
    throw new ClawError('usage', 'agent attach works only in a command an agent runs in its turn', { suggestion: 'the agent runs it through bash_exec to send a file with its answer' });
  const dir = agentDir(home, agent);
  const path = resolve(file);
  checkOwnFile(dir, path);
  leaveRequest(turnOutbox(env) ?? outboxDir(dir, conversation), ATTACH_PREFIX, { path, ...(name ? { name } : {}) });
  return path;
}

/**
 * Outside the sandbox, when the turn's answer is ready: the files its commands attached, stored
 * in `files/`, oldest request first; the requests are gone afterwards. A request that cannot be
 * taken is said in `problems` (for the log), never thrown: the answer goes without it. `shows`
 * (sandbox-profile.ts turnShows) keeps to the files the turn could read: a request is a file its
 * commands wrote, and may name any path.
 */
export function takeAttachments(home: string, dir: AgentDir, conversation: string, shows: (path: string) => boolean = () => true): { attachments: Attachment[]; problems: string[] } {
  const taken = takeRequests(
    outboxDir(dir, conversation),
    (name) => name.startsWith(ATTACH_PREFIX),
    (json) => AttachRequestSchema.parse(json),
  );
  const attachments: Attachment[] = [];
  const problems = taken.problems.map((problem) => `agent attach: ${problem}`);
  for (const { name, request } of taken.requests) {
    try {
      checkOwnFile(dir, request.path);
      if (!shows(request.path)) throw new Error(`${request.path} is not a file of this conversation's`);
      const bytes = readContained(dir.root, request.path);
      if (!bytes || bytes.length > MAX_REPLY_FILE_BYTES) throw new Error('it changed after it was attached');
      const fileName = request.name ?? basename(request.path);
      const mime = mimeOf(fileName);
      attachments.push({ type: kindOf(mime), path: storeFile(home, dir.id, bytes, { name: fileName, mime_type: mime }), name: fileName, mime_type: mime, bytes: bytes.length });
    } catch (error) {
      problems.push(`agent attach: ${name} was not taken: ${(error as Error).message}`);
    }
  }
  return { attachments, problems };
}

/** A plain file inside the agent's directory, with no link on its way (ContainedPathError), not too large. */
function checkOwnFile(dir: AgentDir, path: string): void {
  const inside = relative(dir.root, path);
  if (!isAbsolute(path) || inside === '' || inside.startsWith('..') || isAbsolute(inside)) {
    throw new ClawError('usage', `${path} is outside the agent's directory`, { suggestion: `copy it into ${dir.workdir} first` });
  }
  const stat = statContained(dir.root, path);
  if (!stat?.isFile()) throw new ClawError('not_found', `${path} is not a file`, { suggestion: 'write the file in the workdir first, then attach it' });
  if (stat.size > MAX_REPLY_FILE_BYTES) throw new ClawError('usage', `${path} is larger than ${MAX_REPLY_FILE_BYTES / 1024 / 1024} MB`, { suggestion: 'send a smaller file, or a link' });
}

const MIME_TYPES: Record<string, string> = {
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  png: 'image/png',
  gif: 'image/gif',
  webp: 'image/webp',
  pdf: 'application/pdf',
  txt: 'text/plain',
  md: 'text/markdown',
  csv: 'text/csv',
  json: 'application/json',
  html: 'text/html',
  zip: 'application/zip',
  mp3: 'audio/mpeg',
  ogg: 'audio/ogg',
  mp4: 'video/mp4',
};

function mimeOf(name: string): string {
  return MIME_TYPES[name.split('.').at(-1)?.toLowerCase() ?? ''] ?? 'application/octet-stream';
}

/** image/*, audio/*, video/* by their kind; everything else is a document. */
function kindOf(mime: string): AttachmentKind {
  return ATTACHMENT_KINDS.find((kind) => kind === mime.split('/')[0]) ?? 'document';
}
