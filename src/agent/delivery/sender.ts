import { existsSync } from 'node:fs';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { ClawError } from '../../core/errors.js';
import { deliveriesDir, deliveriesLogFile } from '../../core/layout.js';
import { ATTACHMENT_KINDS, type Attachment } from '../../core/message.js';
import type { OutboundFile } from '../../xgw/index.js';
import { agentDir, loadAgentConfig, requireAgent, type AgentDir } from '../agent-dir.js';
import { placedElsewhere } from '../placement.js';
import { DEFAULT_DELIVER_ATTEMPTS } from '../types.js';
import { hasAgentThread, threadStore } from '../threads.js';
import { fetchReplyFile } from './shared-files.js';

/**
 * The agent whose replies an `agent deliver` sends, as the delivering host sees it. Where its
 * directory is here (SQLite always; PostgreSQL when the agent is placed on this host) all comes
 * from that directory, as ever: its config, its log, its `state.db`, its `files/`. On a store
 * shared by hosts the deliverer is the host that owns the reply's channel, which may not hold the
 * directory (or holds an old copy, left by `agent move`): then the agent exists when its inbox
 * thread does (as xgw routes), `deliver.max_attempts` comes with the subscription's handler
 * (`--max-attempts`, which the agent's host writes from its config), the attempts and given-up
 * replies are kept in this home's `deliveries/state.db`, the log is `logs/deliver.log`, and a
 * reply's files are read from the store (shared-files.ts).
 */
export interface Sender {
  readonly id: string;
  /** The agent's directory as paths in this home; it exists here only when `here`. */
  readonly dir: AgentDir;
  readonly here: boolean;
  /** Where its deliveries are logged. */
  readonly log: string;
  /** The SQLite file of its delivery attempts and given-up replies. */
  readonly state: string;
  /** `deliver.max_attempts`, read when a delivery fails. */
  maxAttempts(): number;
  /** A reply's files as xgw sends them: files on this host. */
  outboundFiles(attachments: readonly Attachment[]): Promise<OutboundFile[]>;
}

/**
 * Finds the agent `id` for delivering its replies here; a missing one is `not_found`.
 * `maxAttempts` is what the handler carries (`--max-attempts`), for an agent whose directory is elsewhere.
 */
export async function findSender(home: string, id: string, env: NodeJS.ProcessEnv, maxAttempts?: number): Promise<Sender> {
  const store = await threadStore(home, env);
  // The directory here is the agent's when it is here and the store places the agent nowhere else.
  if (store.kind === 'sqlite' || (existsSync(agentDir(home, id).config) && (await placedElsewhere(home, id, env)) === null)) return localSender(requireAgent(home, id));
  const dir = agentDir(home, id);
  if (!(await hasAgentThread(home, dir.inbox, env))) {
    throw new ClawError('not_found', `there is no agent ${id} (it has no inbox in ${store.location})`, { suggestion: 'agent list, on its host, shows the agents' });
  }
  return {
    id,
    dir,
    here: false,
    log: deliveriesLogFile(home),
    state: join(deliveriesDir(home), 'state.db'),
    maxAttempts: () => maxAttempts ?? DEFAULT_DELIVER_ATTEMPTS,
    outboundFiles: (attachments) =>
      Promise.all(
        attachments.flatMap((attachment) => {
          if (attachment.path === undefined) return [];
          return [fetchReplyFile(home, store, attachment).then((path) => outboundFile(attachment, path))];
        }),
      ),
  };
}

/** The sender whose directory is `dir`, here. */
export function localSender(dir: AgentDir): Sender {
  return {
    id: dir.id,
    dir,
    here: true,
    log: dir.log,
    state: dir.state,
    maxAttempts: () => loadAgentConfig(dir).deliver.max_attempts,
    // Those in the agent's `files/` (reply-files.ts put them there).
    outboundFiles: async (attachments) =>
      attachments.flatMap((attachment) => {
        if (attachment.path === undefined || isAbsolute(attachment.path) || attachment.path.split('/').includes('..')) return [];
        return [outboundFile(attachment, join(dir.root, attachment.path))];
      }),
  };
}

function outboundFile(attachment: Attachment, path: string): OutboundFile {
  return {
    kind: ATTACHMENT_KINDS.find((k) => k === attachment.type) ?? 'document',
    path,
    name: attachment.name ?? attachment.path!.split('/').at(-1)!,
    ...(attachment.mime_type ? { mime_type: attachment.mime_type } : {}),
    ...(attachment.bytes !== undefined ? { bytes: attachment.bytes } : {}),
  };
}

/** The id of the agent a thread belongs to: `<home>/agents/<id>/threads/<group>/<leaf>` or `.../threads/main`. */
export function agentOfThread(threadPath: string): string {
  let at = dirname(threadPath);
  if (basename(at) !== 'threads') at = dirname(at);
  if (basename(at) !== 'threads') {
    throw new ClawError('usage', `${threadPath} is not a conversation thread of an agent`, { suggestion: 'pass --thread <home>/agents/<id>/threads/peers/<name>' });
  }
  return basename(dirname(at));
}
