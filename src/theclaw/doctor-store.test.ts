import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestHome, type TestHome } from '../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import { openStoreAt } from '../thread/index.js';
import { doctor } from './doctor.js';

// doctor's store check: none for the home's SQLite files; for PostgreSQL, reachable and of this version's schema.

const unavailable = postgresUnavailable();
let t: TestHome;
let cluster: PostgresCluster | undefined;

beforeAll(async () => {
  t = createTestHome();
  if (!unavailable) cluster = await startPostgres();
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
  t.cleanup();
});

const storeChecks = async (env: NodeJS.ProcessEnv) => (await doctor(t.home, env, Date.now(), { offline: true, bwrap: null, chromium: null })).filter((check) => check.name === 'store');

describe('theclaw doctor: the thread store', () => {
  it('says nothing of a store when none is configured (the home keeps its threads in SQLite files)', async () => {
    expect(await storeChecks(t.env)).toEqual([]);
  });

  it('fails a store it cannot reach, naming it without its password', async () => {
    const [check] = await storeChecks({ ...t.env, THECLAW_DATABASE_URL: 'postgres://theclaw:sekret@127.0.0.1:1/threads' });
    expect(check).toMatchObject({ status: 'fail', detail: expect.stringMatching(/^cannot use postgres:\/\/theclaw@127\.0\.0\.1:1\/threads: /), fix: expect.stringMatching(/server runs/) });
    expect(JSON.stringify(check)).not.toContain('sekret');
  });

  it.skipIf(unavailable !== null)(`warns of a database with no store yet and passes it once it holds one${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, async () => {
    const url = await cluster!.createDatabase('doctor');
    writeFileSync(join(t.home, 'config.yaml'), `store: ${url}\n`);
    expect(await storeChecks(t.env)).toEqual([
      {
        name: 'store',
        status: 'warn',
        detail: expect.stringMatching(/^PostgreSQL 1\d\.\d+ at .+ \(from .+config\.yaml\) holds no thread store yet$/),
        fix: `copy the home's threads there: thread migrate --to ${url} (or start afresh: thread init)`,
      },
    ]);
    const store = await openStoreAt(url);
    await (await store.init('agents/a/inbox')).close();
    await store.close();
    expect(await storeChecks(t.env)).toEqual([{ name: 'store', status: 'ok', detail: expect.stringMatching(/: 1 threads$/) }]);
  });
});
