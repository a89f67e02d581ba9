import { readFileSync, rmSync } from 'node:fs';
import * as z from 'zod/mini';
import { listenPrivateSocket, request } from '../../core/ipc.js';
import type { Logger } from '../../core/logger.js';
import { validate } from '../../core/validate.js';
import { writeFileWhole } from '../../core/whole-file.js';
import type { PaiConfig } from '../../pai/index.js';
import type { AgentDir } from '../agent-dir.js';
import { fromBlob, toBlob } from './memory-ranking.js';
import type { AgentConfig } from '../types.js';

/**
 * Where memory search gets its embeddings (memory.embeddings in the agent's config). Never a
 * hard dependency: an embedder that cannot have them answers null, and the search goes on by
 * words alone. A failure is said once in the agent's log; from then on the endpoint is not asked
 * again (every search by words only, at once) until a retry time that backs off from a minute
 * to half an hour, kept in `embeddings-outage.json`; the first success after it says so.
 *
 * The owner at the terminal embeds with pai and the keys of their environment. A turn's commands
 * have no keys (nor, in the sandbox, the pai config or maybe a network): their search asks the
 * running `agent run` over a Unix socket of its own, which embeds with pai for it. The socket
 * embeds texts and nothing else — it reads and writes nothing the command could not — and takes
 * a batch at most.
 */
export interface MemoryEmbedder {
  /** `provider/model`: what the index's vectors are of. */
  model: string;
  /** The vectors of `texts`, in their order, or null when there are none to be had now. */
  embed(texts: string[]): Promise<Float32Array[] | null>;
}

/** The variable that names the runtime's socket to a turn's commands. */
export const EMBEDDINGS_SOCKET_ENV = 'THECLAW_EMBEDDINGS_SOCKET';
/** Texts one embeddings request carries. */
export const EMBED_BATCH = 64;
/** Characters of a text that are embedded: more than most models take, and a message may hold 1 MiB. */
export const EMBED_CHARS = 8_000;

/** A search does not wait long for meaning: words answer anyway. */
const SEARCH_TIMEOUT_SECONDS = 15;
const SEARCH_MAX_ATTEMPTS = 2;
const FIRST_RETRY_MS = 60_000;
const LAST_RETRY_MS = 30 * 60_000;

/**
 * The embedder of a search, or null without memory.embeddings. In a turn (THECLAW_CONVERSATION)
 * only the runtime's socket: without it the search is by words.
 */
export function searchEmbedder(home: string, dir: AgentDir, config: AgentConfig, env: NodeJS.ProcessEnv, logger: Logger): MemoryEmbedder | null {
  const model = config.memory.embeddings?.model;
  if (!model) return null;
  const socket = env[EMBEDDINGS_SOCKET_ENV];
  if (socket) return socketEmbedder(model, socket);
  return env.THECLAW_AGENT === dir.id && env.THECLAW_CONVERSATION ? null : paiEmbedder(home, dir, model, env, logger);
}

/** Embeds with pai, minding and keeping the outage state. */
export function paiEmbedder(home: string, dir: AgentDir, model: string, env: NodeJS.ProcessEnv, logger: Logger, now: () => number = Date.now): MemoryEmbedder {
  return {
    model,
    async embed(texts) {
      const outage = readOutage(dir);
      if (outage && now() < outage.retry_at) return null;
      try {
        // Loaded here: a search by words alone never needs pai.
        const { embed, loadPaiConfig, resolveEmbeddingModel } = await import('../../pai/index.js');
        const paiConfig = loadPaiConfig(home);
        const config: PaiConfig = {
          ...paiConfig,
          timeout_seconds: Math.min(paiConfig.timeout_seconds, SEARCH_TIMEOUT_SECONDS),
          retry: { ...paiConfig.retry, max_attempts: Math.min(paiConfig.retry.max_attempts, SEARCH_MAX_ATTEMPTS) },
        };
        const { vectors } = await embed(resolveEmbeddingModel(config, model), texts, {
          config,
          env,
          home,
          onKeyRotation: (event) => logger.warn(`memory search: the key in ${event.from ?? 'the config'} was refused or rate limited (${event.error}); embedding with ${event.to ?? 'the next'}`),
        });
        if (outage) {
          rmSync(dir.embeddingsOutage, { force: true });
          logger.info(`memory search: the embeddings of ${model} answer again; searching by meaning and words`);
        }
        return vectors;
      } catch (error) {
        const failures = (outage?.failures ?? 0) + 1;
        const retryAt = now() + Math.min(FIRST_RETRY_MS * 2 ** (failures - 1), LAST_RETRY_MS);
        const message = (error instanceof Error ? error.message : String(error)).split('\n')[0]!;
        try {
          writeFileWhole(
            dir.embeddingsOutage,
            `${JSON.stringify({ since: outage?.since ?? new Date(now()).toISOString(), retry_at: retryAt, failures, error: message } satisfies EmbeddingsOutage)}\n`,
          );
        } catch {
          // Not kept: the next search asks again, and says nothing more.
        }
        if (!outage) logger.warn(`memory search: no embeddings from ${model} (${message}); searching by words only, and asking again from ${new Date(retryAt).toISOString()}`);
        return null;
      }
    },
  };
}

const OutageSchema = z.object({ since: z.string(), retry_at: z.number(), failures: z.int(), error: z.string() });
type EmbeddingsOutage = z.output<typeof OutageSchema>;

function readOutage(dir: AgentDir): EmbeddingsOutage | null {
  try {
    const parsed = OutageSchema.safeParse(JSON.parse(readFileSync(dir.embeddingsOutage, 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null; // none (or damaged: asked again)
  }
}

const EmbedRequestSchema = z.strictObject({ texts: z.array(z.string()).check(z.minLength(1), z.maxLength(EMBED_BATCH)) });

/** The vectors as they cross the socket: float32 bytes in base64 (a JSON array of numbers is 3 times larger). */
interface EmbedReply {
  vectors: string[] | null;
}

function socketEmbedder(model: string, socket: string): MemoryEmbedder {
  return {
    model,
    async embed(texts) {
      try {
        const reply = await request<EmbedReply>(socket, { texts }, { timeoutMs: 120_000 });
        return reply.vectors?.map((vector) => fromBlob(Buffer.from(vector, 'base64'))) ?? null;
      } catch {
        return null; // the run is ending, or its socket is gone: by words
      }
    },
  };
}

/**
 * The runtime's side: a socket in a private directory of its own (bound into the sandbox by
 * sandbox-profile.ts) that embeds for the run's turns, or null without memory.embeddings.
 */
export async function serveEmbeddings(home: string, dir: AgentDir, config: AgentConfig, env: NodeJS.ProcessEnv, logger: Logger): Promise<{ socket: string; close: () => Promise<void> } | null> {
  const model = config.memory.embeddings?.model;
  if (!model) return null;
  const embedder = paiEmbedder(home, dir, model, env, logger);
  return listenPrivateSocket('embed', async (raw): Promise<EmbedReply> => {
    const { texts } = validate(EmbedRequestSchema, raw, { what: 'embeddings request', kind: 'usage', suggestion: `send {"texts": [...]} with 1 to ${EMBED_BATCH} texts` });
    const vectors = await embedder.embed(texts.map((text) => text.slice(0, EMBED_CHARS)));
    return { vectors: vectors?.map((vector) => toBlob(vector).toString('base64')) ?? null };
  });
}
