import { createHash } from 'node:crypto';
import type { PlacementDatabase } from './placements.js';

/**
 * Files that travel between hosts through a shared PostgreSQL store (`theclaw.files`, schema
 * version 3): a reply's files, put by the agent's host before the reply is in its thread and read
 * by the host that owns the reply's channel, which has no agent directory to read them from;
 * and files people send, put by the gateway that took them and read by the agent's host before
 * the turn. Named by their SHA-256, as an agent's `files/` names them (core/agent-files.ts), so the
 * same file is kept once and what is read back is checked against its name. Capping their size is
 * the writer's (a reply's files are capped where they are taken, a person's by the gateway); a
 * reader gets none larger than `MAX_SHARED_FILE_BYTES`.
 *
 * A file is kept `SHARED_FILE_DAYS` after its last put, which is also when a put removes those
 * past it: a reply waits that long for its delivery at most, a person's message for its agent's
 * turn, and the host that reads a file keeps its own copy.
 */
export interface SharedFiles {
  /** Stores `bytes` (or renews the stored copy) and returns their SHA-256, in hex. */
  put(bytes: Buffer): Promise<string>;
  /** The file of this SHA-256, or null where none is kept (never put, past its time, or larger than `MAX_SHARED_FILE_BYTES`). */
  get(sha256: string): Promise<Buffer | null>;
}

export const SHARED_FILE_DAYS = 7;

/** The largest file that travels: a reply's largest (Telegram bots send up to 50 MB), more than a channel takes by default (20 MB). */
export const MAX_SHARED_FILE_BYTES = 50 * 1024 * 1024;

export function sha256Of(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** PostgreSQL's: rows of `theclaw.files`. */
export function postgresSharedFiles(db: PlacementDatabase): SharedFiles {
  return {
    async put(bytes) {
      const sha256 = sha256Of(bytes);
      await db.guard(() =>
        db.sql.begin(async (tx) => {
          await tx`INSERT INTO theclaw.files (sha256, bytes) VALUES (${sha256}, ${bytes}) ON CONFLICT (sha256) DO UPDATE SET stored_at = now()`;
          await tx`DELETE FROM theclaw.files WHERE stored_at < now() - ${SHARED_FILE_DAYS}::int * interval '1 day'`;
        }),
      );
      return sha256;
    },
    async get(sha256) {
      const [row] = await db.guard(() => db.sql<{ bytes: Buffer }[]>`SELECT bytes FROM theclaw.files WHERE sha256 = ${sha256} AND octet_length(bytes) <= ${MAX_SHARED_FILE_BYTES}`);
      // A row whose bytes are not its name's is no file of ours: treated as none.
      return row && sha256Of(row.bytes) === sha256 ? row.bytes : null;
    },
  };
}
