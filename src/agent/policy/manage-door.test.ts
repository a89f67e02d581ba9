import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { askRuntime } from '../../core/manage-requests.js';
import { createTestHome, type TestHome } from '../../testing/index.js';
import { agentDir } from '../agent-dir.js';
import { initAgent } from '../lifecycle.js';
import { carryOut, commandLine, manageDoor, type DoorTurn } from './manage-door.js';
import { forwardSends } from './sandbox-sends.js';

// The runtime's side, with the real `agent` CLI in a temp home; the sandbox's side is
// askRuntime in this process, over a real outbox (src/e2e/manage.test.ts runs both under bwrap).

let t: TestHome;
let turn: DoorTurn;

beforeEach(async () => {
  t = createTestHome();
  for (const id of ['admin', 'gardener']) await initAgent(t.home, id);
  const outbox = join(t.home, 'agents', 'admin', 'outbox', 'peer-telegram.main.7171');
  mkdirSync(outbox, { recursive: true });
  turn = { home: t.home, dir: agentDir(t.home, 'admin'), outbox, ownerChat: true, env: t.env };
});

afterEach(() => t.cleanup());

const gardenerConfig = () => readFileSync(join(t.home, 'agents', 'gardener', 'config.yaml'), 'utf8');

describe("the runtime's management door", () => {
  it('carries out a request left while the call runs, and the waiting command gets its output and exit code', async () => {
    const door = manageDoor(turn).serveCall();
    try {
      const result = await askRuntime(turn.outbox, { action: 'agent_config_set', agent: 'gardener', key: 'context.recent_messages', value: '40' });
      expect(result).toEqual({ exit_code: 0, stdout: 'set context.recent_messages of gardener to 40 (the next turn uses it)\n', stderr: '' });
      expect(gardenerConfig()).toMatch(/recent_messages: 40/);
    } finally {
      await door.close();
    }
    expect(readdirSync(turn.outbox)).toEqual([]);
  });

  it("answers a non-owner's turn, and a non-admin agent's, with 126 and why, running nothing", async () => {
    const result = await carryOut({ ...turn, ownerChat: false }, { action: 'agent_init', agent: 'helper' });
    expect(result).toEqual({
      exit_code: 126,
      stdout: '',
      stderr: "Error: agent init is carried out only in the owner's direct chat with admin, and this turn is not one - the owner can ask for it in their direct chat, or run it in a terminal\n",
    });
    expect(existsSync(join(t.home, 'agents', 'helper'))).toBe(false);
    const fromGardener = await carryOut({ ...turn, dir: agentDir(t.home, 'gardener') }, { action: 'agent_init', agent: 'helper' });
    expect(fromGardener.exit_code).toBe(126);
    expect(fromGardener.stderr).toMatch(/^Error: gardener may not manage agents \(manage\.agents is off in its config\) - /);
    expect(existsSync(join(t.home, 'agents', 'helper'))).toBe(false);
  });

  it("refuses an owner's key with 126 and a value the config cannot take with the command's own error, changing nothing", async () => {
    const before = gardenerConfig();
    const policy = await carryOut(turn, { action: 'agent_config_set', agent: 'gardener', key: 'sandbox.profile', value: 'none' });
    expect(policy.exit_code).toBe(126);
    expect(policy.stderr).toMatch(/^Error: sandbox\.profile is the owner's to set, not a turn's - a turn may set pai\.provider, /);
    const bad = await carryOut(turn, { action: 'agent_config_set', agent: 'gardener', key: 'concurrency', value: '0' });
    expect(bad.exit_code).toBe(2);
    expect(bad.stderr).toMatch(/^Error: invalid concurrency for gardener: concurrency: /);
    expect(gardenerConfig()).toBe(before);
  });

  it('answers a request the model shaped itself with exit 2, naming the field', async () => {
    const result = await carryOut(turn, { action: 'agent_start', agent: 'gardener; rm -rf ~' });
    expect(result.exit_code).toBe(2);
    expect(result.stderr).toMatch(/^Error: the request is not one the runtime takes: agent: must be an agent id/);
  });

  it("runs xgw's own command for a pairing code, whose answer the model sees as it is", async () => {
    const result = await carryOut(turn, { action: 'pair_approve', code: 'K7M2QX9P' });
    expect(result).toMatchObject({ exit_code: 1, stdout: '' });
    expect(result.stderr).toMatch(/^Error: no pending pairing request with code K7M2QX9P - /);
  });

  it('makes a command line of the parsed fields only, values after -- where they could look like flags', () => {
    expect(commandLine({ action: 'agent_config_set', agent: 'gardener', key: 'notices.error', value: '-oops', json: true }).args).toEqual([
      'config',
      'set',
      '--json',
      '--',
      'gardener',
      'notices.error',
      '-oops',
    ]);
    expect(commandLine({ action: 'agent_init', agent: 'gardener', model: 'm1' }).args).toEqual(['init', 'gardener', '--kind', 'user', '--model', 'm1']);
    expect(commandLine({ action: 'agent_identity_set', agent: 'gardener', text: '# g' })).toEqual({ tool: 'agent', args: ['identity', 'set', 'gardener'], input: '# g' });
  });

  it('drops what a call left unanswered when it ends, so that neither it nor a result is taken for a message after it', async () => {
    writeFileSync(join(turn.outbox, 'result-manage-1-ab.json'), '{}');
    writeFileSync(join(turn.outbox, 'manage-2-cd.json'), JSON.stringify({ action: 'agent_list' }));
    const late = manageDoor({ ...turn, ownerChat: false }).serveCall();
    await late.close();
    expect(await forwardSends(t.home, turn.outbox, t.env)).toEqual([]);
    expect(readdirSync(turn.outbox)).toEqual([]);
  });

  it("binds the other agents' IDENTITY.md and USAGE.md, read-only, only where the turn may manage agents", () => {
    const gardener = agentDir(t.home, 'gardener');
    expect(manageDoor(turn).binds).toEqual([
      { path: gardener.identity, writable: false, optional: true },
      { path: gardener.usage, writable: false, optional: true },
    ]);
    expect(manageDoor({ ...turn, ownerChat: false }).binds).toEqual([]);
  });
});
