/**
 * The thread store behind one interface (types.ts): SQLite files in the home, or one PostgreSQL
 * database (chosen by `THECLAW_DATABASE_URL` or `store:` in `$THECLAW_HOME/config.yaml`,
 * choose.ts). The `thread` CLI goes through it, and notifier on PostgreSQL (leases shared by
 * hosts, postgres-leases.ts); the other daemons and the agent runtime still open `Thread` on SQLite.
 */
export type { AppendOptions, OpenStoredThreadOptions, RunOutcome, StoreKind, StoredConsumer, StoredEvent, StoredThread, ThreadDump, ThreadStore } from './types.js';
export { openStoreAt, openThreadStore, storeSetting, type StoreSetting } from './choose.js';
export { describePostgresUrl, isPostgresUrl } from './postgres-connect.js';
export { inspectPostgresStore, type PostgresStoreState } from './postgres-inspect.js';
export { describeSummary, migrateThreads, type MigrationResult, type StoreSummary } from './migrate.js';
export { createSqliteStore } from './sqlite-store.js';
export { threadName } from './name.js';
export { agentKey, channelKey, isLive, type ClaimOptions, type ClaimResult, type HostEntry, type Placement, type Placements } from './placements.js';
export { MAX_SHARED_FILE_BYTES, SHARED_FILE_DAYS, sha256Of, type SharedFiles } from './shared-files.js';
export type { DueSubscription, HeldLease, LeaseHolder, PostgresLeases, TakenLease } from './postgres-leases.js';
