import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { bashExec } from '../../pai/index.js';
import { startFakeBrave, startFakeSearxng, type FakeSearchServer } from '../../testing/fake-search.js';
import { ARTICLE_FACT, startFixtureSite, type FixtureSite } from '../../testing/fixture-site.js';
import { BWRAP, createTestHome, NEEDS_BWRAP, type TestHome } from '../../testing/index.js';
import type { AgentDir } from '../agent-dir.js';
import { initAgent } from '../lifecycle.js';
import { routeMessage } from '../router.js';
import { agentSandbox, messageScope } from './sandbox-profile.js';

// `web` from an agent's default sandbox (real bubblewrap, network on as agents have it by
// default): it reads the owner's web/config.yaml there (the home is hidden but that file), keeps
// its cache in the agent's workdir, and never gets a search key.

let site: FixtureSite;
let searx: FakeSearchServer;
let brave: FakeSearchServer;
let t: TestHome;
let helper: AgentDir;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  [site, searx, brave] = await Promise.all([startFixtureSite(), startFakeSearxng(), startFakeBrave({ key: 'BSA-secret' })]);
});
afterAll(() => Promise.all([site.close(), searx.close(), brave.close()]));
beforeEach(async () => {
  t = createTestHome('/tmp');
  helper = await initAgent(t.home, 'helper');
  env = { ...t.env, BRAVE_API_KEY: 'BSA-secret', THECLAW_AGENT: 'helper', THECLAW_AGENT_DIR: helper.root, THECLAW_CONVERSATION: 'c1' };
});
afterEach(() => t.cleanup());

function configure(text: string): void {
  mkdirSync(join(t.home, 'web'), { recursive: true });
  writeFileSync(join(t.home, 'web', 'config.yaml'), text);
}

// The owner's direct chat at the terminal: its commands run in the agent's workdir.
const ownerScope = () => messageScope(helper, routeMessage(helper, 'per-peer', 'external:terminal:local:dm:ann:ann'), true);
const exec = (command: string) =>
  bashExec({ command }, { cwd: helper.workdir, env, sandbox: agentSandbox(t.home, helper, { profile: 'sandbox', network: true }, env, ownerScope()), timeoutSeconds: 60 });

describe.skipIf(!BWRAP)(`web in the default sandbox (${NEEDS_BWRAP})`, () => {
  it("fetches through the owner's allow_private, caches in the workdir, and still refuses what it does not allow", async () => {
    configure('allow_private: ["127.0.0.1"]\n');
    const read = await exec(`web fetch ${site.url('/article')}`);
    expect(read.exit_code, read.stderr).toBe(0);
    expect(read.stdout).toContain('untrusted text from the web');
    expect(read.stdout).toContain(ARTICLE_FACT);
    expect(readdirSync(join(helper.workdir, '.cache', 'web'))).toHaveLength(1);
    const refused = await exec(`web fetch http://127.0.0.2:${site.port}/article`);
    expect(refused.exit_code).toBe(2);
    expect(refused.stderr).toMatch(/refused to fetch from 127\.0\.0\.2/);
  });

  it('searches a keyless SearXNG, and gets no Brave key: the key never enters the sandbox', async () => {
    configure(`search: { provider: searxng, api_root: "${searx.apiRoot}" }\n`);
    expect(await exec('web search brest --count 1')).toMatchObject({ exit_code: 0, stdout: expect.stringContaining('https://ferries.example/brest') });
    configure(`search: { provider: brave, api_root: "${brave.apiRoot}" }\n`);
    const keyless = await exec('web search brest');
    expect(keyless.exit_code).toBe(1);
    expect(keyless.stderr).toMatch(/BRAVE_API_KEY is not set/);
  });
});
