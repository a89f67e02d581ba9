import type { Sql, TransactionSql } from 'postgres';
import { ClawError } from '../../core/errors.js';

/**
 * The thread store's tables in PostgreSQL, in a schema of their own (`theclaw`). A thread is a
 * row of `threads` and its events are rows of one `events` table keyed by (thread, id), ids given
 * from the thread row's `last_id` (which `prune` never lowers, so ids are never reused). An
 * idempotency key is unique per thread by constraint. Text columns that filters compare are
 * `COLLATE "C"`: bytes order them, as SQLite's BINARY does (postgres-filter.ts).
 */
export const SCHEMA_VERSION = 4;

const SCHEMA = `
CREATE SCHEMA IF NOT EXISTS theclaw;
CREATE TABLE theclaw.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE theclaw.threads (
  thread bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text COLLATE "C" NOT NULL UNIQUE,
  last_id bigint NOT NULL DEFAULT 0,
  created_at text NOT NULL
);
CREATE TABLE theclaw.events (
  thread bigint NOT NULL REFERENCES theclaw.threads ON DELETE CASCADE,
  id bigint NOT NULL,
  created_at text COLLATE "C" NOT NULL,
  source text COLLATE "C" NOT NULL,
  type text COLLATE "C" NOT NULL,
  subtype text COLLATE "C",
  content text NOT NULL,
  idempotency_key text,
  PRIMARY KEY (thread, id),
  UNIQUE (thread, idempotency_key)
);
CREATE INDEX events_type ON theclaw.events (thread, type, id);
CREATE TABLE theclaw.consumers (
  thread bigint NOT NULL REFERENCES theclaw.threads ON DELETE CASCADE,
  consumer text COLLATE "C" NOT NULL,
  progress bigint NOT NULL DEFAULT 0,
  subscribed boolean NOT NULL DEFAULT false,
  handler text,
  filter text,
  lease_pid integer,
  lease_start bigint,
  lease_since text,
  failures integer NOT NULL DEFAULT 0,
  last_error text,
  retry_at bigint,
  updated_at text NOT NULL,
  PRIMARY KEY (thread, consumer)
);
`;

/**
 * Version 2: work spread over hosts (issue 26 §2). A subscription may name where it runs
 * (`run_on`, a key of `placements`: `agent:<id>` for an agent's inbox, `channel:<name>` for the
 * deliveries of a channel), else any host runs it. A lease names its host beside its pid and ends
 * at `lease_expires` unless its holder's heartbeat moves that on, so a dead host's leases can be
 * taken over. `placements` says which host a key is on: an agent's (no expiry, moved by
 * `agent move`) or a channel's owning gateway (an expiry its heartbeat renews). `hosts` lists the
 * hosts that share the store, each with its home and when it was last seen.
 */
const SCHEMA_2 = `
ALTER TABLE theclaw.consumers ADD COLUMN run_on text COLLATE "C";
ALTER TABLE theclaw.consumers ADD COLUMN lease_host text COLLATE "C";
ALTER TABLE theclaw.consumers ADD COLUMN lease_expires timestamptz;
CREATE TABLE theclaw.placements (
  key text COLLATE "C" PRIMARY KEY,
  host text COLLATE "C" NOT NULL,
  expires_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE theclaw.hosts (
  name text COLLATE "C" PRIMARY KEY,
  home text NOT NULL,
  seen_at timestamptz NOT NULL DEFAULT now()
);
`;

/**
 * Version 3: a reply's files for a deliverer on another host (issue 26, shared-files.ts). The
 * agent's host puts each file a reply carries here, by its SHA-256, before the reply is in its
 * thread; the host that owns the reply's channel reads it into its own home. A row lives
 * `SHARED_FILE_DAYS` after its last put (`stored_at`).
 */
const SCHEMA_3 = `
CREATE TABLE theclaw.files (
  sha256 text COLLATE "C" PRIMARY KEY,
  bytes bytea NOT NULL,
  stored_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX files_stored_at ON theclaw.files (stored_at);
`;

/**
 * Version 4: an append is one statement (`theclaw.append`), where it was six round trips (begin, the
 * thread's row lock, the keys' lookup, the insert, the notify, commit). Its steps are those of
 * postgres-store.ts's append before: the row lock orders the thread's appends; the statements after
 * it each take a new snapshot (READ COMMITTED in a function), so they see the keys of an append
 * that committed while this one waited for the lock. A key seen before, or earlier in the batch,
 * stores nothing and gives the first event's id; new events get the ids after `last_id`, which
 * moves on with them; the notifiers are told when anything was stored. With `ack_consumer`, its
 * progress moves to `ack_id` in the same transaction (made a consumer if it was none); an id past
 * the newest event raises TC002 with the newest id, a thread that is gone TC001: nothing is stored.
 */
const SCHEMA_4 = `
CREATE FUNCTION theclaw.append(p_thread bigint, p_at text, p_source text[], p_type text[], p_subtype text[], p_content text[], p_key text[], p_ack_consumer text, p_ack_id bigint)
RETURNS TABLE (id bigint, duplicate boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_last bigint;
  v_new bigint;
BEGIN
  SELECT t.last_id INTO v_last FROM theclaw.threads t WHERE t.thread = p_thread FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'thread % is gone', p_thread USING ERRCODE = 'TC001';
  END IF;
  RETURN QUERY
  WITH input AS (
    SELECT i.ord, i.source, i.type, i.subtype, i.content, i.key
    FROM unnest(p_source, p_type, p_subtype, p_content, p_key) WITH ORDINALITY AS i (source, type, subtype, content, key, ord)
  ), keyed AS (
    SELECT i.*, e.id AS stored, i.key IS NULL OR i.ord = min(i.ord) OVER (PARTITION BY i.key) AS leads
    FROM input i LEFT JOIN theclaw.events e ON e.thread = p_thread AND e.idempotency_key = i.key
  ), fresh AS (
    SELECT k.ord, k.source, k.type, k.subtype, k.content, k.key, v_last + row_number() OVER (ORDER BY k.ord) AS new_id
    FROM keyed k WHERE k.stored IS NULL AND k.leads
  ), inserted AS (
    INSERT INTO theclaw.events (thread, id, created_at, source, type, subtype, content, idempotency_key)
    SELECT p_thread, f.new_id, p_at, f.source, f.type, f.subtype, f.content, f.key FROM fresh f
  )
  SELECT coalesce(k.stored, f.new_id, first_of_key.new_id), f.new_id IS NULL
  FROM keyed k
  LEFT JOIN fresh f ON f.ord = k.ord
  LEFT JOIN fresh first_of_key ON NOT k.leads AND first_of_key.key = k.key
  ORDER BY k.ord;
  SELECT v_last + count(*) INTO v_new FROM theclaw.events e WHERE e.thread = p_thread AND e.id > v_last;
  IF v_new > v_last THEN
    UPDATE theclaw.threads SET last_id = v_new WHERE thread = p_thread;
    PERFORM pg_notify('theclaw_threads', p_thread::text);
  END IF;
  IF p_ack_consumer IS NOT NULL THEN
    IF p_ack_id > v_new THEN
      RAISE EXCEPTION '%', v_new USING ERRCODE = 'TC002';
    END IF;
    INSERT INTO theclaw.consumers (thread, consumer, updated_at) VALUES (p_thread, p_ack_consumer, p_at) ON CONFLICT (thread, consumer) DO NOTHING;
    UPDATE theclaw.consumers SET progress = p_ack_id, updated_at = p_at WHERE thread = p_thread AND consumer = p_ack_consumer AND progress < p_ack_id;
  END IF;
END
$$;
`;

/** What takes a schema of version N to N + 1, by N. */
const UPGRADES: Record<number, string> = { 1: SCHEMA_2, 2: SCHEMA_3, 3: SCHEMA_4 };

/** Any constant: the advisory lock under which the first of several processes creates the schema. */
const SCHEMA_LOCK = 0x7468_7264;

/**
 * The schema's version in this database, or null where there is none yet. Creates nothing.
 * It reads `pg_class` as a table, not through `to_regclass`: that takes no lock, so a session's
 * cached "no such table" outlives another's commit, and the second of two processes starting
 * together would create the schema again under the lock.
 */
export async function readSchemaVersion(sql: Sql | TransactionSql): Promise<number | null> {
  const [exists] = await sql<{ found: boolean }[]>`
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'theclaw' AND c.relname = 'meta') AS found`;
  if (!exists?.found) return null;
  const [row] = await sql<{ value: string }[]>`SELECT value FROM theclaw.meta WHERE key = 'schema_version'`;
  return row ? Number(row.value) : null;
}

/**
 * Creates the schema if there is none, or brings an older one up to this version, then checks it.
 * `upTo` stops at an older version: the upgrade's test builds the schema as it was.
 */
export async function ensureSchema(sql: Sql, location: string, upTo = SCHEMA_VERSION): Promise<void> {
  let version = await readSchemaVersion(sql);
  if (version === null || version < upTo) {
    version = await sql.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`;
      let now = await readSchemaVersion(tx);
      if (now === null) {
        await tx.unsafe(SCHEMA);
        await tx`INSERT INTO theclaw.meta (key, value) VALUES ('schema_version', '1')`;
        now = 1;
      }
      for (; now < upTo; now++) await tx.unsafe(UPGRADES[now] as string);
      await tx`UPDATE theclaw.meta SET value = ${String(now)} WHERE key = 'schema_version'`;
      return now;
    });
  }
  if (version !== upTo) {
    throw new ClawError('invalid', `the thread store at ${location} has schema version ${version}, this thread tool knows ${SCHEMA_VERSION}`, {
      suggestion: version > SCHEMA_VERSION ? 'upgrade theclaw' : 'the theclaw schema in that database is not a thread store; point THECLAW_DATABASE_URL at another database',
    });
  }
}
