import { appendFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { agentDir } from '../agent/agent-dir.js';
import { initAgent } from '../agent/lifecycle.js';
import { BWRAP, createTestHome, NEEDS_BWRAP, type TestHome } from '../testing/index.js';
import { doctor, type Check } from './doctor.js';

// doctor's sandbox check: bubblewrap missing, installed but unable to make a sandbox, working, and
// agents that run without one.

let t: TestHome;
beforeEach(async () => {
  t = createTestHome();
  await initAgent(t.home, 'helper');
});
afterEach(() => t.cleanup());

const sandboxCheck = async (bwrap?: string | null): Promise<Check[]> =>
  (await doctor(t.home, t.env, Date.now(), { offline: true, ...(bwrap === undefined ? {} : { bwrap }) })).filter((check) => check.name === 'sandbox');
const withoutSandbox = (id: string) => appendFileSync(agentDir(t.home, id).config, 'sandbox: { profile: none }\n');

describe('theclaw doctor: sandbox', () => {
  it('fails where bubblewrap is missing, with the command that installs it', async () => {
    expect(await sandboxCheck(null)).toEqual([
      {
        name: 'sandbox',
        status: 'fail',
        detail: 'bubblewrap (bwrap) is not installed: agents refuse every command (exit 126) unless their sandbox.profile is none',
        fix: expect.stringMatching(/^apt-get install bubblewrap .*or set sandbox\.profile: none in agents\/<id>\/config\.yaml$/),
      },
    ]);
  });

  it('fails where bwrap cannot make a sandbox, saying why and how to allow it', async () => {
    const [check] = await sandboxCheck('/bin/false');
    expect(check).toMatchObject({ status: 'fail', detail: expect.stringMatching(/^bwrap exited with 1: agents refuse/), fix: expect.stringContaining('unprivileged user namespaces') });
  });

  it('warns about each agent that runs without a sandbox, and does not need bubblewrap when none uses it', async () => {
    await initAgent(t.home, 'other');
    withoutSandbox('other');
    expect((await sandboxCheck(null))[0]).toMatchObject({ status: 'fail' }); // helper still needs it
    withoutSandbox('helper');
    expect(await sandboxCheck(null)).toEqual([
      {
        name: 'sandbox',
        status: 'warn',
        detail: "helper, other run commands without a sandbox (sandbox.profile: none): with every file and right of the daemons' user",
        fix: 'set sandbox.profile: sandbox in agents/helper/config.yaml, agents/other/config.yaml',
      },
    ]);
  });

  it.skipIf(!BWRAP)(`is ok where bubblewrap makes a sandbox (${NEEDS_BWRAP})`, async () => {
    expect(await sandboxCheck()).toEqual([{ name: 'sandbox', status: 'ok', detail: `every agent's commands run in bubblewrap (${BWRAP})` }]);
  });
});
