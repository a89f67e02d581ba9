import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeBrave, type FakeSearchServer } from '../testing/fake-search.js';
import { createTestHome, type TestHome } from '../testing/index.js';
import { doctor } from './doctor.js';

// doctor's search check: none without a provider, the key's presence, and one tiny query to the provider unless offline.

let t: TestHome;
let brave: FakeSearchServer;
beforeAll(async () => {
  brave = await startFakeBrave({ key: 'BSA-doctor' });
});
afterAll(() => brave.close());
beforeEach(() => {
  t = createTestHome();
});
afterEach(() => t.cleanup());

const searchChecks = async (env: NodeJS.ProcessEnv, offline: boolean) => (await doctor(t.home, env, Date.now(), { offline, bwrap: null })).filter((check) => check.name === 'search');

describe('theclaw doctor: search', () => {
  it('says nothing of search when no provider is configured', async () => {
    expect(await searchChecks(t.env, true)).toEqual([]);
  });

  it('fails a Brave provider without its key, and asks it one query when the key is there', async () => {
    mkdirSync(join(t.home, 'web'));
    writeFileSync(join(t.home, 'web', 'config.yaml'), `search: { provider: brave, api_root: "${brave.apiRoot}" }\n`);
    const { BRAVE_API_KEY: _, ...withoutKey } = t.env;
    expect(await searchChecks(withoutKey, true)).toEqual([
      { name: 'search', status: 'fail', detail: 'brave: the search provider brave has no key: BRAVE_API_KEY is not set', fix: expect.stringMatching(/^export BRAVE_API_KEY=\.\.\./) },
    ]);
    const asked = brave.requests.length;
    expect(await searchChecks({ ...t.env, BRAVE_API_KEY: 'BSA-doctor' }, false)).toEqual([{ name: 'search', status: 'ok', detail: expect.stringMatching(/^brave answered a search in \d+ ms$/) }]);
    expect(brave.requests.length).toBe(asked + 1);
    expect((await searchChecks({ ...t.env, BRAVE_API_KEY: 'wrong' }, false))[0]).toMatchObject({ status: 'fail', detail: expect.stringMatching(/refused the key/) });
  });
});
