import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, relative, sep } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseMessageContent } from '../core/message.js';
import { packageRoot } from '../core/package.js';
import { CALL_MARK, findMarked, killMarked, newMark, TURN_MARK, type ProcessMark } from '../core/turn-processes.js';
import { BASE_SANDBOX_ENV, bashExec } from '../pai/index.js';
import { BWRAP, createTestHome, NEEDS_BWRAP, threadEvents, waitFor, type TestHome } from '../testing/index.js';
import { openThread } from '../thread/index.js';
import type { AgentDir } from './agent-dir.js';
import { initAgent } from './lifecycle.js';
import { agentSandbox } from './sandbox-profile.js';
import { OUTBOX_ENV } from './sandbox-sends.js';
import type { AgentConfig, SandboxProfile } from './types.js';

// The sandbox with the real bubblewrap: each of the model's escapes the issue lists, through
// bashExec with the environment agent run gives it, and what the narrow path still allows.

let t: TestHome;
let helper: AgentDir;
let other: AgentDir;
let env: NodeJS.ProcessEnv;
let listener: Server | undefined;
const marks: ProcessMark[] = [];

beforeEach(() => {
  // Under /tmp: the sandbox's /tmp is its own, so the home's neighbours there are out of sight.
  t = createTestHome('/tmp');
  helper = initAgent(t.home, 'helper');
  other = initAgent(t.home, 'other');
  const write = (file: string, text: string) => {
    mkdirSync(join(t.home, file, '..'), { recursive: true });
    writeFileSync(join(t.home, file), text);
  };
  write('xgw/config.yaml', 'channels: [] # XGW-STATE\n');
  write('xgw/webchat-main.token', 'TOKEN-OF-THE-WEB-CHAT\n');
  write('run/notifier.pid', '{}\n');
  write('pai/config.yaml', 'default: mock/echo\n');
  const thread = openThread(join(other.threads, 'main', 'secret'), { home: t.home, create: true });
  thread.push({ source: 'self', type: 'message', content: 'A CONVERSATION OF OTHER' });
  thread.close();
  // What agent run passes (run.ts), on top of a daemon's own environment.
  env = {
    ...t.env,
    DAEMON_ONLY: 'daemon-value',
    THECLAW_THREAD: join(helper.inbox),
    THECLAW_CONSUMER: 'inbox',
    THECLAW_AGENT: 'helper',
    THECLAW_AGENT_DIR: helper.root,
    THECLAW_CONVERSATION: 'c1',
    THECLAW_ASKING_EVENT: '1',
  };
});

afterEach(async () => {
  for (const mark of marks.splice(0)) await killMarked(mark);
  await new Promise<void>((resolve) => (listener ? listener.close(() => resolve()) : resolve()));
  listener = undefined;
  t.cleanup();
});

function exec(command: string, options: { profile?: SandboxProfile; network?: boolean; turnMark?: ProcessMark; timeoutSeconds?: number } = {}) {
  const settings: AgentConfig['sandbox'] = { profile: options.profile ?? 'sandbox', network: options.network ?? true };
  return bashExec({ command }, { cwd: helper.workdir, env, sandbox: agentSandbox(t.home, helper, settings, env), turnMark: options.turnMark, timeoutSeconds: options.timeoutSeconds ?? 30 });
}

const names = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('=')[0]!);
/** Pids of this machine's processes whose command line holds `text`. */
const running = (text: string) =>
  readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').includes(text);
      } catch {
        return false;
      }
    });

describe('agentSandbox', () => {
  it('is none for the profile none, and is made with the PATH bwrap is found on', () => {
    expect(agentSandbox(t.home, helper, { profile: 'none', network: true }, env)).toBeUndefined();
    expect(agentSandbox(t.home, helper, { profile: 'sandbox', network: true }, { PATH: '/nowhere' })?.bwrap).toBe(existsSync('/usr/bin/bwrap') ? '/usr/bin/bwrap' : null);
  });

  it("hides the home and gives back the own directory (read-only but for workdir, memory, skills and the search index), the conversation's outbox, the other agents' configs, skills and the PATH entries under the home", () => {
    const sandbox = agentSandbox(t.home, helper, { profile: 'sandbox', network: false }, env)!;
    const outbox = join(helper.root, 'outbox', 'c1');
    expect(sandbox).toMatchObject({ network: false, hidden: [t.home], setEnv: { THECLAW_OUTBOX: outbox } });
    expect(existsSync(outbox)).toBe(true);
    expect(sandbox.binds).toEqual([
      { path: helper.root, writable: false },
      { path: helper.workdir, writable: true, optional: false },
      { path: helper.memory, writable: true, optional: true },
      { path: helper.skills, writable: true, optional: true },
      { path: join(helper.root, 'index'), writable: true, optional: true },
      { path: outbox, writable: true },
      { path: other.config, writable: false, optional: true },
      { path: join(t.home, 'skills'), writable: false, optional: true },
      { path: join(t.home, 'cmds'), writable: false, optional: true },
      { path: join(t.home, 'web', 'config.yaml'), writable: false, optional: true },
      { path: join(t.home, '.bin'), writable: false, optional: true },
      { path: packageRoot(), writable: false },
    ]);
    const workspace = agentSandbox(t.home, helper, { profile: 'workspace-only', network: true }, env)!;
    expect(workspace.binds.slice(0, 3)).toEqual([
      { path: helper.root, writable: false },
      { path: helper.workdir, writable: true, optional: false },
      { path: outbox, writable: true },
    ]);
  });
});

describe.skipIf(!BWRAP)(`bash_exec in the sandbox (${NEEDS_BWRAP})`, () => {
  it('env and cat /proc/$PPID/environ show only the listed variables: nothing of the daemon', async () => {
    const result = await exec('env; echo ---; echo $PPID; tr "\\0" "\\n" < /proc/$PPID/environ');
    expect(result.exit_code, result.stderr).toBe(0);
    const [own, parent] = result.stdout.split('---\n') as [string, string];
    const listed: string[] = [
      ...BASE_SANDBOX_ENV,
      'THECLAW_HOME',
      'THECLAW_AGENT',
      'THECLAW_AGENT_DIR',
      'THECLAW_CONVERSATION',
      'THECLAW_ASKING_EVENT',
      'THECLAW_LOG_LEVEL',
      OUTBOX_ENV,
      TURN_MARK,
      CALL_MARK,
    ];
    expect(names(own).filter((name) => ![...listed, 'PWD', 'SHLVL', '_', 'OLDPWD'].includes(name))).toEqual([]);
    expect(own).toContain('THECLAW_AGENT=helper\n');
    expect(own).toContain(`THECLAW_HOME=${t.home}\n`);
    expect(parent.split('\n')[0]).toBe('1'); // the sandbox's init, not the daemon
    expect(names(parent.split('\n').slice(1).join('\n')).filter((name) => !listed.includes(name))).toEqual([]);
    expect(result.stdout).not.toMatch(/DAEMON_ONLY|daemon-value|THECLAW_THREAD|THECLAW_CONSUMER/);
  });

  it('sees no process of the machine: the daemon is not there to read', async () => {
    const result = await exec(`kill -0 ${process.pid} || echo no-such-process; cat /proc/${process.pid}/environ`);
    expect(result.stdout).toBe('no-such-process\n');
    expect(result.exit_code).not.toBe(0);
    expect(result.stdout + result.stderr).not.toContain('daemon-value');
  });

  it('ls $THECLAW_HOME/.. shows nothing but the home; in the home only the agents and the CLIs, no xgw state, token, socket or config', async () => {
    writeFileSync(`${t.home}-neighbour`, 'next to the home');
    try {
      const parent = await exec('ls -A "$THECLAW_HOME/.."');
      // TheClaw's own directory shows there too when it is installed next to the home (a clone in /tmp).
      const installed = relative(dirname(t.home), packageRoot()).split(sep)[0]!;
      const expected = [basename(t.home), ...(installed && !installed.startsWith('..') && !isAbsolute(installed) ? [installed] : [])].sort();
      expect(parent).toMatchObject({ exit_code: 0, stdout: `${expected.join('\n')}\n` });
    } finally {
      rmSync(`${t.home}-neighbour`, { force: true });
    }
    const home = await exec('ls -A "$THECLAW_HOME"; echo ---; ls -A "$THECLAW_HOME/agents/other"');
    expect(home).toMatchObject({ exit_code: 0, stdout: '.bin\nagents\n---\nconfig.yaml\n' });
    for (const command of [
      'cat "$THECLAW_HOME/xgw/config.yaml"',
      'cat "$THECLAW_HOME/xgw/webchat-main.token"',
      'ls "$THECLAW_HOME/agents/other/threads"',
      'ls "$THECLAW_HOME/agents/other/inbox"',
      'ls "$THECLAW_HOME/run"',
    ]) {
      const result = await exec(command);
      expect(result.exit_code, command).not.toBe(0);
      expect(result.stdout, command).toBe('');
    }
  });

  it('agent send other works from inside: the message lands in its inbox when the call ends, in the name of this agent and conversation', async () => {
    const result = await exec('agent send other --text hi');
    expect(result).toMatchObject({ exit_code: 0, stdout: 'queued: it goes to other when this command ends\n' });
    const [message, ...more] = threadEvents(t.home, other.inbox);
    expect(more).toEqual([]);
    expect(message).toMatchObject({ source: 'internal:dm:c1:helper', type: 'message' });
    expect(parseMessageContent(message!.content)).toMatchObject({ text: 'hi', reply_context: { kind: 'internal', agent_id: 'helper', conversation_id: 'c1', asking_event_id: 1 } });
    expect(readdirSync(join(helper.root, 'outbox', 'c1'))).toEqual([]);
  });

  it("thread peek reads the agent's own threads from inside, what a writer holds open included, and cannot write them", async () => {
    const path = join(helper.threads, 'peers', 'terminal.local.ann');
    const writer = openThread(path, { home: t.home, create: true });
    writer.push({ source: 'self', type: 'message', content: 'CHECKPOINTED' });
    writer.close(); // no WAL left: the database alone
    const peek = async () =>
      (await exec(`thread peek --thread ${path} --json`)).stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { content: string });
    expect((await peek()).map((event) => event.content)).toEqual(['CHECKPOINTED']);
    const open = openThread(path, { home: t.home });
    try {
      open.push({ source: 'self', type: 'message', content: 'IN THE WAL' }); // the runtime holds the thread open
      expect((await peek()).map((event) => event.content)).toEqual(['CHECKPOINTED', 'IN THE WAL']);
    } finally {
      open.close();
    }
    const push = await exec(`thread push --thread ${path} --source self --type message --content FORGED`);
    expect(push.exit_code).toBe(1);
    expect(push.stderr).toMatch(/^Error: the data directory is read-only/);
    expect(threadEvents(t.home, path).map((event) => event.content)).toEqual(['CHECKPOINTED', 'IN THE WAL']);
  });

  it('agent send from inside cannot pose as someone else, nor send to a missing agent, and a planted file or link is not sent', async () => {
    const forged = await exec('agent send other --text hi --source internal:dm:x:admin');
    expect(forged.exit_code).toBe(2);
    expect(forged.stderr).toMatch(/^Error: --source cannot be given inside the sandbox - /);
    expect((await exec('agent send nobody --text hi')).stderr).toMatch(/^Error: there is no agent nobody - /);
    const planted = await exec(`ln -s ${other.config} "$THECLAW_OUTBOX/1-link.json"; echo '{"to":"other","text":"x","source":"internal:dm:x:admin"}' > "$THECLAW_OUTBOX/2-forged.json"`);
    expect(planted.exit_code).toBe(0);
    expect(planted.stderr).toContain('[bash_exec: agent send: 1-link.json was not taken: not a request left by a command]');
    expect(planted.stderr).toContain('[bash_exec: agent send: 2-forged.json was not taken:');
    expect(threadEvents(t.home, other.inbox)).toEqual([]);
    expect(readFileSync(other.config, 'utf8')).toContain('agent_id: other'); // the link's target is untouched
  });

  it('writes only in the agent directory: not ~, not the home, not its own config.yaml', async () => {
    const outside = join(homedir(), `outside-${randomBytes(4).toString('hex')}`);
    const config = readFileSync(helper.config, 'utf8');
    const runtimeFiles = ['config.yaml', 'threads/planted', 'sessions/planted', 'logs/agent.log', 'inbox/planted', 'IDENTITY.md'];
    for (const command of [`touch ${outside}`, 'touch "$THECLAW_HOME/planted"', `touch ${other.root}/planted`, ...runtimeFiles.map((file) => `echo planted >> "$THECLAW_AGENT_DIR/${file}"`)]) {
      const result = await exec(command);
      expect(result.exit_code, command).not.toBe(0);
    }
    expect(existsSync(outside)).toBe(false);
    expect(existsSync(join(t.home, 'planted'))).toBe(false);
    expect(existsSync(join(other.root, 'planted'))).toBe(false);
    expect(readFileSync(helper.config, 'utf8')).toBe(config);
    expect(existsSync(join(helper.threads, 'planted'))).toBe(false);

    const inside = await exec('echo kept > note && echo remembered >> ../memory/agent.md && echo scratch > /tmp/scratch && cat /tmp/scratch');
    expect(inside).toMatchObject({ exit_code: 0, stdout: 'scratch\n' });
    expect(readFileSync(join(helper.workdir, 'note'), 'utf8')).toBe('kept\n');
    expect(readFileSync(join(helper.memory, 'agent.md'), 'utf8')).toContain('remembered');
    expect((await exec('cat /tmp/scratch')).exit_code, "each call's /tmp is its own").not.toBe(0);
  });

  it('workspace-only: only the workdir is writable', async () => {
    const denied = await exec('touch ../memory/planted || touch ../skills/planted', { profile: 'workspace-only' });
    expect(denied.exit_code).not.toBe(0);
    expect(existsSync(join(helper.memory, 'planted'))).toBe(false);
    expect(await exec('touch note && cat ../IDENTITY.md > /dev/null', { profile: 'workspace-only' })).toMatchObject({ exit_code: 0 });
    expect(existsSync(join(helper.workdir, 'note'))).toBe(true);
  });

  it('with network off cannot reach a loopback port the same command reaches with it on', async () => {
    listener = createServer((socket) => socket.end('pong\n'));
    await new Promise<void>((resolve) => listener!.listen(0, '127.0.0.1', resolve));
    const { port } = listener.address() as { port: number };
    // bash's /dev/tcp: a loopback connection as curl makes, without needing curl.
    const command = `exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3`;
    expect(await exec(command, { network: true })).toMatchObject({ exit_code: 0, stdout: 'pong\n' });
    const off = await exec(command, { network: false });
    expect(off.exit_code).not.toBe(0);
    expect(off.stdout).toBe('');
  });

  it('setsid sleep 600, nohup and env -i do not survive the call, though the turn goes on; under none the marked one does', async () => {
    const turnMark = newMark(TURN_MARK);
    marks.push(turnMark);
    const tag = `6${randomBytes(3).readUIntBE(0, 3)}`;
    const result = await exec(`setsid sleep ${tag}.1 & nohup sleep ${tag}.2 >/dev/null 2>&1 & env -i setsid sleep ${tag}.3 & echo started`, { turnMark });
    expect(result).toMatchObject({ exit_code: 0, stdout: 'started\n' });
    // The kernel ends a PID namespace's processes when its init exits; it may take a moment.
    await waitFor(() => running(`sleep ${tag}.`).length === 0 && findMarked(turnMark).length === 0, 'no sleep of the call left', 2_000);

    const none = await exec(`setsid sleep ${tag}.4 & echo started`, { profile: 'none', turnMark });
    expect(none.stdout).toBe('started\n');
    expect(running(`sleep ${tag}.4`)).toHaveLength(1); // lives until its turn ends
  });

  it('a call that times out is killed with everything in its sandbox', async () => {
    const tag = `6${randomBytes(3).readUIntBE(0, 3)}`;
    const started = Date.now();
    const result = await exec(`setsid sleep ${tag}.1 & sleep ${tag}.2`, { turnMark: newMark(TURN_MARK), timeoutSeconds: 1 });
    expect(result.exit_code).toBe(124);
    expect(result.stderr).toContain('[bash_exec: timed out after 1 s; the command and its children were killed]');
    expect(Date.now() - started).toBeLessThan(5_000);
    await waitFor(() => running(`sleep ${tag}.`).length === 0, 'no sleep of the call left', 2_000);
  });

  it("cannot write into the agent's own threads (thread push is refused, nothing is added), which the runtime writes", async () => {
    const path = join(helper.threads, 'main', 'mine');
    const thread = openThread(path, { home: t.home, create: true });
    thread.push({ source: 'self', type: 'message', content: 'MY OWN' });
    thread.close();
    const result = await exec(`thread push --thread ${path} --source self --type message --content planted`);
    expect(result.exit_code).not.toBe(0);
    expect(result.stderr).toContain('read-only');
    expect(threadEvents(t.home, path).map((event) => event.content)).toEqual(['MY OWN']);
  });
});
