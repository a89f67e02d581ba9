import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { checkConfig, DEFAULT_XGW_CONFIG } from '../xgw/config.js';
import { connectWebchat, XgwConfigSchema } from '../xgw/index.js';
import { createTestHome, PROVIDER_KEYS, runTool, startFakeOpenAI, threadEvents, waitFor, writeFakePaiConfig, type FakeLlmServer, type TestHome } from '../testing/index.js';
import { parse } from 'yaml';
import type { AgentStatus } from '../agent/lifecycle.js';
import { agentDir } from '../agent/agent-dir.js';
import { defaultSource, routeMessage } from '../agent/index.js';
import { parseMessageContent } from '../core/message.js';
import type { DemoResult } from './demo.js';
import type { Check } from './doctor.js';
import { doctor } from './doctor.js';
import type { SystemStatus } from './status.js';
import type { UpResult, WokenSubscription } from './system.js';

/**
 * `theclaw` against the real system: the built CLIs as processes in a temp THECLAW_HOME, the
 * daemons they start, and the web chat reached the way a browser reaches it.
 */

let t: TestHome | undefined;
let llm: FakeLlmServer | undefined;
let blocker: Server | undefined;

afterEach(async () => {
  if (t) await runTool('theclaw', ['down'], t.env);
  t?.cleanup();
  t = undefined;
  await llm?.close();
  llm = undefined;
  blocker?.close();
  blocker = undefined;
});

/** A home with no provider key in the environment, and a web chat on a free port. */
function home(options: { webchatPort?: number } = {}): TestHome {
  t = createTestHome();
  for (const key of PROVIDER_KEYS) delete t.env[key];
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeFileSync(
    join(t.home, 'xgw', 'config.yaml'),
    `channels:\n  - { id: webchat:main, type: webchat, port: ${options.webchatPort ?? 0}, access: open }\n  - { id: terminal:local, type: terminal, access: open }\nroutes:\n  - { channel: "*", peer: "*", agent: admin }\n`,
  );
  return t;
}

async function theclaw(args: string[], env = t!.env) {
  return runTool('theclaw', args, env);
}

const byName = (checks: Check[], name: Check['name']) => checks.filter((check) => check.name === name);
/** For doctor in-process where no assertion is about the sandbox or the browser: their probes (a bwrap run) were most of a call. */
const NO_PROBES = { bwrap: null, chromium: null };

async function statusOf(env = t!.env): Promise<SystemStatus> {
  const result = await theclaw(['status', '--json'], env);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as SystemStatus;
}

describe('theclaw demo', () => {
  it('runs the whole system in a temporary home: one web chat message, its reply, every event it produced, then stops and cleans up', async () => {
    const env = { ...process.env };
    for (const key of PROVIDER_KEYS) delete env[key];
    const result = await runTool('theclaw', ['demo', '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    const demo = JSON.parse(result.stdout) as DemoResult;
    expect(demo.reply).toMatch(/^\[offline mock\] Hello from admin/);
    const [inbox, thread] = demo.threads;
    expect(inbox!.path).toBe('agents/admin/inbox');
    expect(inbox!.events.map((e) => e.summary)).toEqual(['Hello! What can you do?']);
    expect(inbox!.events[0]!.source).toMatch(/^external:webchat:main:dm:/);
    // inbox → thread → the turn's attempt, toolcall/usage records → the reply, delivered
    expect(thread!.events.map((e) => (e.subtype ? `${e.type}/${e.subtype}` : e.type))).toEqual(['message', 'record/attempt', 'record/usage', 'record/toolcall', 'record/usage', 'message']);
    expect(thread!.events[3]!.summary).toMatch(/^uname -sr → exit 0: Linux/);
    expect(thread!.events[5]!.summary).toBe(demo.reply.slice(0, 159) + (demo.reply.length > 160 ? '…' : demo.reply.slice(159)));
    expect(demo.delivered).toEqual({ event_id: thread!.events[5]!.id, channel: 'webchat:main', thread: thread!.path });
    expect(existsSync(demo.home)).toBe(false);

    const text = await runTool('theclaw', ['demo'], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('admin → you: [offline mock] Hello from admin');
    expect(text.stdout).toMatch(/#4 {2}record\/toolcall +self +uname -sr → exit 0/);
    expect(text.stdout).toContain('(acknowledged by agent deliver)');
  });

  it("--real says it found no model and exits 1 without one, and otherwise answers through the user's own pai/config.yaml", async () => {
    home();
    const none = await theclaw(['demo', '--real']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^Error: theclaw demo --real found no model: no provider key is set and .*pai\/config\.yaml names no provider - set OPENAI_API_KEY/);
    expect(none.stdout).toBe('');

    llm = await startFakeOpenAI({ defaultStep: { kind: 'text', text: 'from the configured server' } });
    writeFakePaiConfig(t!.home, llm);
    const real = await theclaw(['demo', '--real', '--json']);
    expect(real.code, real.stderr).toBe(0);
    expect(JSON.parse(real.stdout) as DemoResult).toMatchObject({ reply: 'from the configured server' });
  });
});

describe('theclaw up, status, down', () => {
  it('makes a home made by mkdir -p private, and everything the system writes while it answers is 0700/0600', async () => {
    home();
    chmodSync(t!.home, 0o755);
    chmodSync(join(t!.home, 'xgw'), 0o755);
    chmodSync(join(t!.home, 'xgw', 'config.yaml'), 0o644);
    const up = await theclaw(['up', '--json']);
    expect(up.code, up.stderr).toBe(0);
    const first = JSON.parse(up.stdout) as UpResult;
    expect(first.repaired).toEqual(expect.arrayContaining(['.', 'xgw', 'xgw/config.yaml']));
    chmodSync(join(t!.home, 'xgw', 'config.yaml'), 0o644);
    const again = await theclaw(['up']);
    expect(again.stdout).toContain('privacy   made 1 path(s) under the home private (others could read or enter them), e.g. xgw/config.yaml\n');
    const url = first.xgw.channels.find((c) => c.id === 'webchat:main')!.url!;
    const client = await connectWebchat(url);
    try {
      await client.send('are you there?');
      await client.nextReply(AbortSignal.timeout(20_000));
    } finally {
      client.close();
    }
    const open = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const path = join(dir, name);
        const stat = lstatSync(path);
        if (stat.isSymbolicLink()) return [];
        const here = (stat.mode & 0o077) !== 0 ? [`${path.slice(t!.home.length)} ${(stat.mode & 0o777).toString(8)}`] : [];
        return stat.isDirectory() ? [...here, ...open(path)] : here;
      });
    expect(statSync(t!.home).mode & 0o777).toBe(0o700);
    expect(open(t!.home)).toEqual([]);
    expect(readdirSync(join(t!.home, 'agents', 'admin')).length).toBeGreaterThan(3); // there was something to look at
  });

  it('lists every agent, each web chat under the agent its route goes to, and the status page only where it is served', async () => {
    home();
    writeFileSync(
      join(t!.home, 'xgw', 'config.yaml'),
      `channels:
  - { id: webchat:main, type: webchat, port: 0, access: open }
  - { id: webchat:guest, type: webchat, port: 0, access: pairing }
  - { id: terminal:local, type: terminal, access: open }
routes:
  - { channel: webchat:guest, agent: helper }
  - { channel: "*", peer: "*", agent: admin }
`,
    );
    expect((await runTool('agent', ['init', 'helper'], t!.env)).code).toBe(0);
    const up = await theclaw(['up']);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toMatch(/agents {4}admin, warden, maintainer, evolver, helper \(created admin, warden, maintainer, evolver\)/);
    const talk = up.stdout
      .slice(up.stdout.indexOf('Talk to'), up.stdout.indexOf('Next:'))
      .replace(/:\d+\//g, ':PORT/')
      .replace(/token=[0-9a-f]+/g, 'token=T');
    expect(talk.split('\n')).toEqual([
      'Talk to admin:',
      '  web chat  http://127.0.0.1:PORT/?token=T',
      '  status    http://127.0.0.1:PORT/status?token=T',
      '  terminal  agent chat admin',
      'Talk to helper:',
      '  web chat  http://127.0.0.1:PORT/?token=T',
      '  terminal  agent chat helper',
      '',
    ]);
    const statusUrl = /status {4}(\S+)/.exec(up.stdout)![1]!;
    expect((await fetch(statusUrl)).status).toBe(200);
  });

  it('starts the daemons and the system agents, routes the web chat to admin, says it is offline, says a killed daemon died and starts it again, and stops what it started', async () => {
    home();
    const first = await theclaw(['up']);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toMatch(/^Notice: no provider key found: agents answer with the offline mock model .* - run theclaw setup to choose a provider .*OPENAI_API_KEY/m);
    expect(first.stdout).toMatch(/notifier {2}started \(pid \d+\)/);
    expect(first.stdout).toMatch(/agents {4}admin, warden, maintainer, evolver \(created admin, warden, maintainer, evolver\)/);
    expect(first.stdout).toMatch(/web chat {2}http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+/);
    expect(first.stdout).toMatch(/status {4}http:\/\/127\.0\.0\.1:\d+\/status\?token=[0-9a-f]+/);
    expect(first.stdout).toContain('terminal  agent chat admin');
    expect(first.stdout).toContain('mock/echo (offline: no provider key)');
    for (const name of ['notifier', 'xgw']) expect(existsSync(join(t!.home, 'run', `${name}.pid`))).toBe(true);
    // The system agents' work, on timers: the sweeps and the daily reflection.
    const timers = JSON.parse((await runTool('notifier', ['timer', 'list', '--json'], t!.env)).stdout) as { id: string; command: string }[];
    expect(timers.map((timer) => [timer.id, timer.command.split(' ').at(-1)])).toEqual([
      ['evolver-daily', 'evolve'],
      ['maintainer-sweep', 'maintain'],
      ['warden-sweep', 'ward'],
    ]);

    // Again: nothing is started twice, and the offline notice is said on every start.
    const second = await theclaw(['up', '--json']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain('Notice: no provider key found');
    const again = JSON.parse(second.stdout) as UpResult;
    expect(again.started).toEqual([]);
    expect(again.created).toEqual([]);

    const url = again.xgw.channels.find((c) => c.id === 'webchat:main')!.url!;
    const client = await connectWebchat(url);
    try {
      await client.send('are you there?');
      expect((await client.nextReply(AbortSignal.timeout(20_000))).text).toBe('[offline mock] You said: are you there?');
    } finally {
      client.close();
    }

    const status = await statusOf();
    expect(status.components.map((c) => [c.name, c.running])).toEqual([
      ['notifier', true],
      ['xgw', true],
    ]);
    for (const component of status.components) {
      expect(component.pid).toBeGreaterThan(0);
      expect(component.rss_bytes).toBeGreaterThan(10_000_000);
      expect(component.uptime_seconds).toBeGreaterThanOrEqual(0);
    }
    expect(status.agents.map((a) => [a.id, 'started' in a && a.started])).toEqual([
      ['admin', true],
      ['evolver', true],
      ['maintainer', true],
      ['warden', true],
    ]);
    expect(status.model).toEqual({ provider: 'mock', model: 'echo', offline: true });
    const adminOf = (s: SystemStatus) => s.agents.find((a): a is AgentStatus => a.id === 'admin' && !('error' in a))!;
    await waitFor(async () => adminOf(await statusOf()).undelivered === 0, 'the reply to be acknowledged');
    const admin = adminOf(await statusOf());
    expect(admin).toMatchObject({ pending: 0, threads: 1 });
    expect(admin.last_activity).not.toBeNull();

    const text = await theclaw(['status']);
    expect(text.stdout).toMatch(/^notifier +running {2}pid \d+ {2}up \d+s {2}\d+ MB$/m);
    expect(text.stdout).toMatch(/^ {2}webchat:main: running {2}http/m);
    expect(text.stdout).toMatch(/^ {2}admin +started {2}pending 0 {2}undelivered 0/m);
    expect(text.stdout).toContain('queues: nothing waiting');

    // Killed, notifier leaves its lock behind: status says it died (not "stopped") and how to bring it back.
    process.kill(status.components[0]!.pid!, 'SIGKILL');
    await waitFor(async () => (await statusOf()).components[0]!.died, 'the killed notifier to be seen as died');
    expect((await theclaw(['status'])).stdout).toMatch(/^notifier +DIED: it did not stop cleanly \(killed, or see logs\/notifier\.log\) - bring it back with theclaw up$/m);
    const back = await theclaw(['up']);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toMatch(/notifier {2}started \(pid \d+\)/);
    expect((await statusOf()).components.map((c) => [c.name, c.running, c.died])).toEqual([
      ['notifier', true, false],
      ['xgw', true, false],
    ]);

    const down = await theclaw(['down', '--json']);
    expect(JSON.parse(down.stdout)).toEqual({ stopped: ['notifier', 'xgw'] });
    const stopped = await statusOf();
    expect(stopped.components.map((c) => c.running)).toEqual([false, false]);
    expect(stopped.components.map((c) => c.died)).toEqual([false, false]); // stopped cleanly
    expect((await theclaw(['down'])).stdout).toBe('nothing was running\n');
  });

  it('uses a provider from the environment or the config instead of the mock, and then says nothing of the mock', async () => {
    home();
    const withKey = await theclaw(['status', '--json'], { ...t!.env, OPENAI_API_KEY: 'sk-test-not-used' });
    expect((JSON.parse(withKey.stdout) as SystemStatus).model).toEqual({ provider: 'openai', model: 'gpt-4o-mini', offline: false });

    // An OpenAI-compatible server (Ollama, vLLM) in pai's config: the agents answer through it.
    llm = await startFakeOpenAI({ defaultStep: { kind: 'text', text: 'from the configured server' } });
    writeFakePaiConfig(t!.home, llm);
    const up = await theclaw(['up', '--json']);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stderr).not.toContain('mock');
    const result = JSON.parse(up.stdout) as UpResult;
    expect(result.model).toEqual({ provider: 'fake', model: 'm1', offline: false });
    const client = await connectWebchat(result.xgw.channels.find((c) => c.id === 'webchat:main')!.url!);
    try {
      await client.send('hello');
      expect((await client.nextReply(AbortSignal.timeout(20_000))).text).toBe('from the configured server');
    } finally {
      client.close();
    }
    expect(llm.requests.length).toBeGreaterThan(0);
  });

  it('takes turns when two ups run at once: both say up, and both daemons run', async () => {
    home();
    const [first, second] = await Promise.all([theclaw(['up', '--json']), theclaw(['up', '--json'])]);
    expect(first.code, first.stderr).toBe(0);
    expect(second.code, second.stderr).toBe(0);
    const started = [first, second].flatMap((result) => (JSON.parse(result.stdout) as { started: string[] }).started);
    expect(started.sort()).toEqual(['notifier', 'xgw']); // each daemon started once, by one of them
    expect((await statusOf()).components.map((c) => c.running)).toEqual([true, true]);
  });

  it('leaves nothing running when one daemon cannot start, and doctor names the cause', async () => {
    home();
    writeFileSync(join(t!.home, 'xgw', 'config.yaml'), 'channels:\n  - { id: telegram:main, type: telegram, token_env: NOT_SET_BOT_TOKEN }\nroutes:\n  - { agent: admin }\n');
    const result = await theclaw(['up']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^Error: .*NOT_SET_BOT_TOKEN.* - /m);
    const status = await statusOf();
    expect(status.components.map((c) => c.running)).toEqual([false, false]); // notifier was stopped again
    const doctor = await theclaw(['doctor', '--json']);
    expect(doctor.code).toBe(1);
    const report = JSON.parse(doctor.stdout) as { ok: boolean; checks: Check[] }; // one document, even on failure
    expect(report.ok).toBe(false);
    expect(report.checks).toContainEqual(
      expect.objectContaining({ name: 'config', status: 'fail', detail: expect.stringContaining('NOT_SET_BOT_TOKEN is not set'), fix: 'export NOT_SET_BOT_TOKEN=<the bot token> before theclaw up' }),
    );
  });

  describe('in one home that is up with the defaults', () => {
    // Shared by the tests below, in order (the last breaks an agent's config): an up is most of their time.
    let shared: TestHome;
    beforeAll(async () => {
      shared = home();
      t = undefined; // not the afterEach's: afterAll takes it down
      expect((await theclaw(['up'], shared.env)).code).toBe(0);
    });
    afterAll(async () => {
      await theclaw(['down'], shared.env);
      shared.cleanup();
    });

    it("reports the model notifier runs agents with, not the shell's, and says how to switch, in up and in status", async () => {
      const withKey = { ...shared.env, OPENAI_API_KEY: 'sk-test-not-used' };
      const again = await theclaw(['up', '--json'], withKey);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stderr).toContain(
        'Warning: notifier was started with another environment, so agents use mock/echo (offline: no provider key), not openai/gpt-4o-mini - to switch: theclaw down && theclaw up',
      );
      expect(JSON.parse(again.stdout)).toMatchObject({ model: { provider: 'mock', offline: true }, shell_model: { provider: 'openai' } });
      const status = await theclaw(['status', '--json'], withKey);
      expect(JSON.parse(status.stdout)).toMatchObject({ model: { provider: 'mock', offline: true }, shell_model: { provider: 'openai' } });
      expect(status.stderr).toContain('Warning: notifier was started with another environment, so agents use mock/echo (offline: no provider key), not openai/gpt-4o-mini');
      expect((await theclaw(['status'], shared.env)).stderr).not.toContain('Warning: notifier was started with another environment');
    });

    it("shows every other agent when one agent's config is broken", async () => {
      writeFileSync(join(shared.home, 'agents', 'warden', 'config.yaml'), 'agent_id: warden\nconcurrency: four\n');
      const status = await statusOf(shared.env);
      expect(status.agents.map((a) => ('error' in a ? `${a.id}: broken` : a.id))).toEqual(['admin', 'evolver', 'maintainer', 'warden: broken']);
      expect(status.agents.find((a) => a.id === 'warden')).toEqual({ id: 'warden', error: expect.stringMatching(/concurrency/) });
      expect((await theclaw(['status'], shared.env)).stdout).toMatch(/^ {2}warden +BROKEN: .*concurrency/m);
    });
  });

  it('refuses to start anything when a config is broken, naming the file and what to fix', async () => {
    home();
    writeFileSync(join(t!.home, 'xgw', 'config.yaml'), 'channels:\n  - { id: webchat:main, type: webchat, port: 0, host: 0.0.0.0 }\nroutes: []\n');
    const result = await theclaw(['up']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^Error: invalid .*xgw\/config\.yaml: .*host.* - /m);
    expect(existsSync(join(t!.home, 'run', 'notifier.pid'))).toBe(false);
    expect(existsSync(join(t!.home, 'agents'))).toBe(false);
  });

  it('writes a default gateway config that passes every check: the web chat on loopback and the terminal, routed to admin', () => {
    const config = XgwConfigSchema.parse(parse(DEFAULT_XGW_CONFIG));
    expect(checkConfig(config)).toEqual([]);
    expect(config.channels.map((c) => c.id)).toEqual(['webchat:main', 'terminal:local']);
    expect(config.channels[0]).toMatchObject({ host: '127.0.0.1', port: 18790 });
    expect(config.routes).toEqual([{ channel: '*', peer: '*', agent: 'admin' }]);
  });
});

describe('theclaw doctor', () => {
  it('on a machine where nothing was set up: says the data directory is missing and how to create it, and exits 0', async () => {
    t = createTestHome();
    const env = { ...t.env, THECLAW_HOME: join(t.home, 'not-yet') };
    const result = await runTool('theclaw', ['doctor', '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    const { ok, checks } = JSON.parse(result.stdout) as { ok: boolean; checks: Check[] };
    expect(ok).toBe(true);
    expect(checks.map((c) => [c.name, c.status])).toEqual([
      ['node', 'ok'],
      ['data directory', 'warn'],
    ]);
    expect(checks[1]!.fix).toBe('theclaw up creates it');
    expect(readdirSync(t.home)).not.toContain('not-yet'); // doctor made nothing
  });

  it('fails a data directory that theclaw up could not make, with the reason up would give', async () => {
    t = createTestHome();
    const file = join(t.home, 'a-file');
    writeFileSync(file, '');
    for (const [home, said] of [
      [join(file, 'home'), /a-file\/home cannot be made: a part of it is a file, not a directory$/],
      ['/proc/theclaw-doctor-nope', /^\/proc\/theclaw-doctor-nope cannot be made: its directory takes no new entries/],
    ] as const) {
      const result = await runTool('theclaw', ['doctor', '--offline', '--json'], { ...t.env, THECLAW_HOME: home });
      expect(result.code, result.stderr).toBe(1);
      const data = (JSON.parse(result.stdout) as { checks: Check[] }).checks.find((c) => c.name === 'data directory')!;
      expect(data.status).toBe('fail');
      expect(data.detail).toMatch(said);
      const up = await runTool('theclaw', ['up'], { ...t.env, THECLAW_HOME: home });
      expect(up.code).toBe(1);
      expect(up.stderr).toContain(data.detail);
    }
  });

  it('refuses to be up without its web chat (port taken), and doctor finds it, a broken config, stale locks, a missing key and old pending events, each with its fix; a failure exits 1', async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker!.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    home({ webchatPort: port });
    // Never "up" without the web chat: exit 1 with the fix, and nothing left running.
    const up = await theclaw(['up']);
    expect(up.code, up.stderr).toBe(1);
    expect(up.stdout).not.toContain('TheClaw is up');
    expect(up.stderr).toMatch(
      new RegExp(
        `^Error: webchat:main cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use - set another port for webchat:main in xgw/config\\.yaml \\(0 picks a free one\\), or stop the program that uses it$`,
        'm',
      ),
    );
    expect((await statusOf()).components.map((c) => c.running)).toEqual([false, false]);
    // A lock left by a process that died, and an inbox message of a stopped agent.
    writeFileSync(join(t!.home, 'run', 'xgw.pid'), JSON.stringify({ pid: 999_999, start: 1, acquired_at: '2026-01-01T00:00:00Z' }));
    expect((await runTool('agent', ['stop', 'warden'], t!.env)).code).toBe(0);
    expect((await runTool('agent', ['send', 'warden', '--text', 'check the disks'], t!.env)).code).toBe(0);
    mkdirSync(join(t!.home, 'pai'), { recursive: true });
    writeFileSync(join(t!.home, 'pai', 'config.yaml'), 'default: openai/gpt-4o-mini\n');

    const result = await theclaw(['doctor']);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(new RegExp(`^FAIL {2}ports: webchat:main: port ${port} on 127\\.0\\.0\\.1 is taken by another program\\n {6}fix: stop that program, or set another port`, 'm'));
    expect(result.stdout).toMatch(/^FAIL {2}providers: the default model openai\/gpt-4o-mini has no key\n {6}fix: export OPENAI_API_KEY=\.\.\./m);
    expect(result.stdout).toMatch(/^warn {2}locks: held by processes that died: run\/xgw\.pid\n {6}fix: /m);
    expect(result.stdout).toMatch(/^warn {2}daemons: notifier and xgw are not running/m);
    expect(result.stdout).toMatch(/^warn {2}daemons: notifier and xgw are not running: messages wait; xgw died \(did not stop cleanly: killed, or see its log\)$/m);
    expect(result.stderr).toMatch(/^Error: 2 check\(s\) failed: providers, ports - apply the fixes listed above/m);

    // A minute later the stopped agent's message is reported, with the command that starts it.
    const later = await doctor(t!.home, t!.env, Date.now() + 61_000, NO_PROBES);
    expect(byName(later, 'pending')).toEqual([{ name: 'pending', status: 'warn', detail: 'events waiting more than a minute: 1 in the inbox of warden, which is stopped', fix: 'agent start warden' }]);
    const now = await doctor(t!.home, t!.env, Date.now(), NO_PROBES);
    expect(byName(now, 'config')).toEqual([expect.objectContaining({ status: 'ok' })]);

    writeFileSync(join(t!.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: soon\n');
    const broken = await doctor(t!.home, t!.env, Date.now(), NO_PROBES);
    expect(byName(broken, 'config')).toEqual([expect.objectContaining({ status: 'fail', detail: expect.stringMatching(/^notifier: .*sweep_interval_seconds/) })]);
  });

  it('reports an agent whose model has no room for its identity and memory caps', async () => {
    home();
    expect((await runTool('agent', ['init', 'helper'], t!.env)).code).toBe(0);
    expect(byName(await doctor(t!.home, t!.env, Date.now(), { ...NO_PROBES, offline: true }), 'agents')).toEqual([
      { name: 'agents', status: 'ok', detail: "every agent's model has room for its identity and memory caps" },
    ]);
    // The model the agent uses turns out to be small.
    mkdirSync(join(t!.home, 'pai'), { recursive: true });
    writeFileSync(
      join(t!.home, 'pai', 'config.yaml'),
      'default: small/m1\nproviders:\n  small: { api: openai-completions, base_url: "http://127.0.0.1:9/v1", models: [{ id: m1, context_window: 8000 }] }\n',
    );
    expect(byName(await doctor(t!.home, t!.env, Date.now(), { ...NO_PROBES, offline: true }), 'agents')).toEqual([
      {
        name: 'agents',
        status: 'fail',
        detail: expect.stringMatching(
          /^helper: the model small\/m1 has a window of 8000 tokens, less than the \d+ this agent needs \(identity \d+ \+ memory caps 4500 \+ 5096 for the message and the reply\)$/,
        ),
        fix: 'choose a model with a larger window (pai: in agents/helper/config.yaml), or lower context.memory_caps there',
      },
    ]);
    // Lower caps fit it.
    const config = join(t!.home, 'agents', 'helper', 'config.yaml');
    writeFileSync(config, readFileSync(config, 'utf8') + 'context: { memory_caps: { agent: 500, person: 300, conversation: 400 } }\n');
    expect(byName(await doctor(t!.home, t!.env, Date.now(), { ...NO_PROBES, offline: true }), 'agents')).toEqual([expect.objectContaining({ status: 'ok' })]);
  });
});

describe('theclaw status, doctor and retry when the model fails', () => {
  it('show the error a refusal left and the messages an outage holds, check the model with one call (not with --offline), and retry at once', async () => {
    home();
    let mode: 'refuse' | 'down' | 'up' = 'refuse';
    llm = await startFakeOpenAI({
      defaultStep: () => (mode === 'refuse' ? { kind: 'error', status: 401 } : mode === 'down' ? { kind: 'error', status: 503 } : { kind: 'text', text: 'OK' }),
    });
    writeFakePaiConfig(t!.home, llm);
    // A backoff long enough that only `theclaw retry` can explain an answer within the test.
    mkdirSync(join(t!.home, 'notifier'), { recursive: true });
    writeFileSync(join(t!.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: 0.5\nbackoff: { initial_seconds: 60, max_seconds: 300 }\n');
    const up = await theclaw(['up']);
    expect(up.code, up.stderr).toBe(0);
    const send = (text: string) => runTool('agent', ['send', 'admin', '--text', text], t!.env);
    const thread = routeMessage(agentDir(t!.home, 'admin'), 'per-peer', defaultSource({})).path;

    // A refusal: the message gets its error notice, and status lists the error record.
    expect((await send('first')).code).toBe(0);
    const [refused] = await waitFor(async () => {
      const errors = (await statusOf()).recent_errors;
      return errors.length > 0 ? errors : undefined;
    }, 'the error record');
    expect(refused).toEqual({
      agent: 'admin',
      thread: expect.stringMatching(/^threads\/peers\/terminal\.local\./),
      id: expect.any(Number),
      created_at: expect.any(String),
      stage: 'llm',
      kind: 'auth',
      status: 401,
      error: expect.stringMatching(/refused the credentials \(HTTP 401\)/),
    });
    const refusedText = (await theclaw(['status'])).stdout;
    expect(refusedText).toMatch(/^recent errors:\n {2}\S+ {2}admin\/threads\/peers\/terminal\.local\.\S+ #\d+ {2}llm \(auth 401\): .*refused the credentials/m);
    expect(refusedText).toContain('waiting for the model: nothing');
    // The model check makes one real call, which is refused too; the record is reported.
    const requests = llm.requests.length;
    const checked = await doctor(t!.home, t!.env, Date.now(), NO_PROBES);
    expect(llm.requests.length).toBe(requests + 1);
    expect(byName(checked, 'model')).toEqual([
      { name: 'model', status: 'fail', detail: expect.stringMatching(/^fake\/m1 did not answer: .*refused the credentials \(HTTP 401\)/), fix: expect.stringContaining('check the key') },
      { name: 'model', status: 'ok', detail: 'no message waits for the model' },
    ]);
    expect(byName(checked, 'errors')).toEqual([
      expect.objectContaining({ status: 'warn', detail: expect.stringMatching(/^1 error\(s\) in the last 24 hours; the newest, .* in admin\/threads\/peers\/terminal\.local\.\S+: llm: /) }),
    ]);
    // A day later it is no longer news.
    expect(byName(await doctor(t!.home, t!.env, Date.now() + 25 * 3_600_000, { ...NO_PROBES, offline: true }), 'errors')).toEqual([
      { name: 'errors', status: 'ok', detail: 'no error recorded in the last 24 hours' },
    ]);

    // An outage: the message waits, and status and doctor say so (doctor --offline calls nothing).
    mode = 'down';
    expect((await send('second')).code).toBe(0);
    const [wait] = await waitFor(async () => {
      const waits = (await statusOf()).model_waits;
      return waits[0]?.retry_at ? waits : undefined; // once notifier has seen the run fail
    }, 'the message waiting for the model');
    expect(wait).toEqual({
      agent: 'admin',
      pending: 1,
      since: expect.any(String),
      kind: 'server',
      status: 503,
      error: expect.stringMatching(/^the model is unavailable: .*\(HTTP 503\)/),
      retry_at: expect.any(String),
    });
    expect(Date.parse(wait!.retry_at!) - Date.now()).toBeGreaterThan(30_000);
    expect((await theclaw(['status'])).stdout).toMatch(/^waiting for the model \(theclaw retry tries now\):\n {2}admin +1 message\(s\) since \S+, next try \S+: the model is unavailable: /m);
    const before = llm.requests.length;
    const offline = await theclaw(['doctor', '--offline', '--json']);
    expect(offline.code, offline.stdout).toBe(0);
    expect(llm.requests.length).toBe(before);
    expect(byName((JSON.parse(offline.stdout) as { checks: Check[] }).checks, 'model')).toEqual([
      {
        name: 'model',
        status: 'warn',
        detail: expect.stringMatching(/^messages wait for the model: 1 of admin since \S+ \(the model is unavailable: .*; next try \S+\)$/),
        fix: expect.stringContaining('theclaw retry'),
      },
    ]);

    // The model is back: retry runs the waiting agent now, not in a minute.
    mode = 'up';
    const retried = await theclaw(['retry', '--json']);
    expect(retried.code, retried.stderr).toBe(0);
    expect((JSON.parse(retried.stdout) as { woken: WokenSubscription[] }).woken).toContainEqual(
      expect.objectContaining({ thread: 'agents/admin/inbox', consumer: 'inbox', failures: 1, last_error: expect.stringContaining('the model is unavailable') }),
    );
    // The maintainer's sweep, when it runs meanwhile, reports the 401 into this same chat (the
    // terminal is the owner's): its report is no message of this conversation's turns.
    const answered = () =>
      threadEvents(t!.home, thread, "type = 'message' AND source = 'self'")
        .map((event) => parseMessageContent(event.content))
        .filter((message) => !message.text.startsWith('maintainer: '));
    await waitFor(() => answered().some((message) => message.text === 'OK'), 'the answer', 20_000);
    expect(answered().map((message) => [message.notice ?? 'answer', message.text])).toEqual([
      ['error', 'I could not answer: the model refused the request (401). The owner has been told.'],
      ['answer', 'OK'],
    ]);
    await waitFor(async () => (await statusOf()).model_waits.length === 0, 'no message waiting');
    expect(byName(await doctor(t!.home, t!.env, Date.now(), NO_PROBES), 'model')).toEqual([
      { name: 'model', status: 'ok', detail: expect.stringMatching(/^fake\/m1 answered in \d+ ms$/) },
      { name: 'model', status: 'ok', detail: 'no message waits for the model' },
    ]);
    expect((await theclaw(['retry'])).stdout).toBe('woke notifier: nothing was waiting out a backoff\n');

    await theclaw(['down']);
    const stopped = await theclaw(['retry']);
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toBe('Error: notifier is not running, so nothing is retried - theclaw up starts it, and it runs what waits\n');
  });
});
