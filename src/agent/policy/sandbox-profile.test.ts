import { randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, relative, sep } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseMessageContent } from '../../core/message.js';
import { packageRoot } from '../../core/package.js';
import { CALL_MARK, findMarked, killMarked, newMark, TURN_MARK, type ProcessMark } from '../../core/turn-processes.js';
import { BASE_SANDBOX_ENV, bashExec } from '../../pai/index.js';
import { BWRAP, createTestHome, NEEDS_BWRAP, threadEvents, waitFor, type TestHome } from '../../testing/index.js';
import { openThread } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { initAgent } from '../lifecycle.js';
import { routeMessage } from '../router.js';
import { takeAttachments } from '../delivery/reply-files.js';
import { agentSandbox, messageScope, sandboxFact, turnShows, turnWorkdir, type TurnScope } from './sandbox-profile.js';
import { OUTBOX_ENV } from './sandbox-sends.js';
import { AgentConfigSchema, SANDBOX_LIMIT_DEFAULTS, type AgentConfig, type SandboxProfile } from '../types.js';

// The sandbox with the real bubblewrap: each of the model's escapes the issue lists, through
// bashExec with the environment agent run gives it, and what the narrow path still allows.

const OWNER = 'external:terminal:local:dm:ann:ann';
const PEER = 'external:telegram:main:dm:5151:5151';

let t: TestHome;
let helper: AgentDir;
let other: AgentDir;
let env: NodeJS.ProcessEnv;
/** The owner's direct chat at the terminal: the conversation the commands run for, unless a test says otherwise. */
let scope: TurnScope;
let listener: Server | undefined;
const marks: ProcessMark[] = [];

beforeEach(async () => {
  // Under /tmp: the sandbox's /tmp is its own, so the home's neighbours there are out of sight.
  t = createTestHome('/tmp');
  helper = await initAgent(t.home, 'helper');
  other = await initAgent(t.home, 'other');
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
  scope = messageScope(helper, routeMessage(helper, 'per-peer', OWNER), true);
  // What agent run passes (run.ts), on top of a daemon's own environment.
  env = {
    ...t.env,
    DAEMON_ONLY: 'daemon-value',
    THECLAW_THREAD: join(helper.inbox),
    THECLAW_CONSUMER: 'inbox',
    THECLAW_AGENT: 'helper',
    THECLAW_AGENT_DIR: helper.root,
    THECLAW_CONVERSATION: scope.threadId,
    THECLAW_ASKING_EVENT: '1',
  };
});

afterEach(async () => {
  for (const mark of marks.splice(0)) await killMarked(mark);
  await new Promise<void>((resolve) => (listener ? listener.close(() => resolve()) : resolve()));
  listener = undefined;
  t.cleanup();
});

function exec(command: string, options: { profile?: SandboxProfile; network?: boolean; turnMark?: ProcessMark; timeoutSeconds?: number; scope?: TurnScope } = {}) {
  const settings: AgentConfig['sandbox'] = { profile: options.profile ?? 'sandbox', network: options.network ?? true, limits: SANDBOX_LIMIT_DEFAULTS };
  const turn = options.scope ?? scope;
  const turnEnv = { ...env, THECLAW_CONVERSATION: turn.threadId };
  return bashExec(
    { command },
    { cwd: turnWorkdir(helper, turn), env: turnEnv, sandbox: agentSandbox(t.home, helper, settings, turnEnv, turn), turnMark: options.turnMark, timeoutSeconds: options.timeoutSeconds ?? 30 },
  );
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
    const peer = messageScope(helper, routeMessage(helper, 'per-peer', PEER), false);
    expect(agentSandbox(t.home, helper, { profile: 'none', network: true }, env, peer)).toBeUndefined();
    expect(existsSync(turnWorkdir(helper, peer)), "the peer's workdir, where its commands run").toBe(true);
    expect(agentSandbox(t.home, helper, { profile: 'sandbox', network: true }, { PATH: '/nowhere' }, scope)?.bwrap).toBe(existsSync('/usr/bin/bwrap') ? '/usr/bin/bwrap' : null);
  });

  it("runs each call under the config's sandbox.limits, the defaults for those it does not name", () => {
    const settings = AgentConfigSchema.parse({ agent_id: 'helper', sandbox: { limits: { processes: 100, tmp_mb: 64 } } }).sandbox;
    expect(agentSandbox(t.home, helper, settings, env, scope)?.limits).toEqual({ processes: 100, memoryMb: 4096, fileSizeMb: 1024, tmpMb: 64, diskMb: 4096 });
    expect(AgentConfigSchema.safeParse({ agent_id: 'helper', sandbox: { limits: { processes: 2 } } }).success).toBe(false);
  });

  it("hides the home and gives a peer's conversation back only its own: the agent's memory and skills read-only, its person's memory, summaries and thread, a workdir and index of its own, its outbox; the other agents' configs, skills and the PATH entries under the home", () => {
    const route = routeMessage(helper, 'per-peer', PEER);
    const peer = messageScope(helper, route, false, [join(helper.root, 'files', 'abc.pdf')]);
    const sandbox = agentSandbox(t.home, helper, { profile: 'sandbox', network: false }, env, peer)!;
    const outbox = join(helper.root, 'outbox', route.threadId);
    const workdir = join(helper.root, 'workdirs', route.threadId);
    const index = join(helper.root, 'index', 'conversations', route.threadId);
    const person = join(helper.memory, `user-${route.peerKey}.md`);
    expect(sandbox).toMatchObject({ network: false, hidden: [t.home], setEnv: { THECLAW_OUTBOX: outbox } });
    for (const made of [outbox, workdir, index, person]) expect(existsSync(made), made).toBe(true);
    const read = (path: string) => ({ path, writable: false, optional: true });
    expect(sandbox.binds).toEqual([
      read(helper.config),
      read(helper.identity),
      read(helper.usage),
      read(helper.skills),
      read(join(helper.memory, 'agent.md')),
      read(join(helper.memory, 'daily', 'agent')),
      read(join(helper.memory, 'archive', 'agent')),
      { path: person, writable: true },
      read(join(helper.memory, 'daily', `user-${route.peerKey}`)),
      read(join(helper.memory, 'archive', `user-${route.peerKey}`)),
      read(join(helper.memory, `thread-${route.threadId}.md`)),
      read(join(helper.memory, 'conversations', route.threadId)),
      read(route.path),
      read(join(helper.root, 'files', 'abc.pdf')),
      { path: workdir, writable: true },
      { path: index, writable: true },
      { path: outbox, writable: true },
      read(other.config),
      read(join(t.home, 'skills')),
      read(join(t.home, 'cmds')),
      read(join(t.home, 'web', 'config.yaml')),
      read(join(t.home, '.bin')),
      { path: packageRoot(), writable: false },
    ]);
    expect(turnWorkdir(helper, peer)).toBe(workdir);
    expect(sandboxFact({ profile: 'sandbox', network: false }, peer)).toBe("in a sandbox (writable: this conversation's own workdir and this person's memory; no network)");
  });

  it("gives the owner's conversations the agent's workdir, memory and skills writable; workspace-only only a workdir", () => {
    const writable = (sandbox: ReturnType<typeof agentSandbox>) => sandbox!.binds.filter((bind) => bind.writable).map((bind) => relative(helper.root, bind.path));
    expect(writable(agentSandbox(t.home, helper, { profile: 'sandbox', network: true }, env, scope))).toEqual([
      'skills',
      'memory/agent.md',
      'memory/user-terminal.local.ann.md',
      'workdir',
      `index/conversations/${scope.threadId}`,
      `outbox/${scope.threadId}`,
    ]);
    expect(sandboxFact({ profile: 'sandbox', network: true }, scope)).toBe("in a sandbox (writable: my workdir, my agent memory, this person's memory and my skills; network on)");
    expect(writable(agentSandbox(t.home, helper, { profile: 'workspace-only', network: true }, env, scope))).toEqual(['workdir', `outbox/${scope.threadId}`]);
    const group = messageScope(helper, routeMessage(helper, 'per-peer', 'external:telegram:main:group:-100:5151'), false);
    expect(writable(agentSandbox(t.home, helper, { profile: 'workspace-only', network: true }, env, group))).toEqual([`workdirs/${group.threadId}`, `outbox/${group.threadId}`]);
    expect(sandboxFact({ profile: 'sandbox', network: true }, group)).toBe("in a sandbox (writable: this conversation's own workdir and this group's memory; network on)");
  });

  it('leaves out a memory file or folder that a link stands in for, never creates a file through one, and refuses a workdir that is a link', () => {
    const route = routeMessage(helper, 'per-peer', PEER);
    const secret = join(t.home, 'pai', 'config.yaml');
    symlinkSync(secret, join(helper.memory, `user-${route.peerKey}.md`));
    mkdirSync(join(helper.memory, 'daily'));
    symlinkSync(other.threads, join(helper.memory, 'daily', 'agent'));
    const binds = agentSandbox(t.home, helper, { profile: 'sandbox', network: true }, env, messageScope(helper, route, false))!.binds.map((bind) => bind.path);
    expect(binds).not.toContain(join(helper.memory, `user-${route.peerKey}.md`));
    expect(binds).not.toContain(join(helper.memory, 'daily', 'agent'));
    expect(binds).toContain(join(helper.memory, 'archive', 'agent'));
    expect(readFileSync(secret, 'utf8')).toBe('default: mock/echo\n');
    // A workdir a link stands in for is refused: the turn's commands do not run.
    rmSync(join(helper.root, 'workdirs', route.threadId), { recursive: true });
    symlinkSync(other.root, join(helper.root, 'workdirs', route.threadId));
    expect(() => agentSandbox(t.home, helper, { profile: 'sandbox', network: true }, env, messageScope(helper, route, false))).toThrow(/is a link, not a folder of helper's/);
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
    expect(message).toMatchObject({ source: `internal:dm:${scope.threadId}:helper`, type: 'message' });
    expect(parseMessageContent(message!.content)).toMatchObject({ text: 'hi', reply_context: { kind: 'internal', agent_id: 'helper', conversation_id: scope.threadId, asking_event_id: 1 } });
    expect(readdirSync(join(helper.root, 'outbox', scope.threadId))).toEqual([]);
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

  it("a peer's commands append to their own memory file, but cannot swap it for a link, move or remove it, nor write the agent's memory or a new memory file", async () => {
    const peer = messageScope(helper, routeMessage(helper, 'per-peer', PEER), false);
    const own = peer.ownMemory!;
    const secret = join(t.home, 'pai', 'config.yaml');
    writeFileSync(peer.memory.agent, 'I keep notes short.\n');
    expect(await exec(`echo likes tea >> ${own}`, { scope: peer })).toMatchObject({ exit_code: 0 });
    for (const command of [`ln -sf ${secret} ${own}`, `mv ${own} ${own}.old`, `rm -f ${own}`, `echo planted >> ${peer.memory.agent}`, `echo planted > ${join(helper.memory, 'new.md')}`]) {
      const result = await exec(command, { scope: peer });
      expect(result.exit_code, command).not.toBe(0);
    }
    expect(lstatSync(own).isFile()).toBe(true);
    expect(readFileSync(own, 'utf8')).toBe('likes tea\n');
    expect(readFileSync(peer.memory.agent, 'utf8')).toBe('I keep notes short.\n');
    expect(existsSync(join(helper.memory, 'new.md'))).toBe(false);
    // Its working directory is its own: the owner's workdir is not there.
    writeFileSync(join(helper.workdir, 'owner-notes.txt'), 'OWNER-FILE');
    const where = await exec(`pwd; ls ${helper.workdir} || echo no-owner-workdir`, { scope: peer });
    expect(where.stdout).toBe(`${turnWorkdir(helper, peer)}\nno-owner-workdir\n`);
  });

  it("a peer's memory search finds nothing of the owner's conversation, even when it names it (THECLAW_CONVERSATION, --all)", async () => {
    const thread = openThread(scope.thread!, { home: t.home, create: true });
    thread.push({ source: OWNER, type: 'message', content: 'hello' }); // the asking message (THECLAW_ASKING_EVENT), which a search leaves out
    thread.push({ source: OWNER, type: 'message', content: 'my PIN is 4321' });
    thread.close();
    writeFileSync(scope.ownMemory!, 'The PIN of the safe is 7788.\n');
    // The owner's search has both: the index knows them.
    expect((await exec('agent memory search helper PIN')).stdout).toMatch(/4321[\s\S]*7788|7788[\s\S]*4321/);
    const peer = messageScope(helper, routeMessage(helper, 'per-peer', PEER), false);
    for (const command of [`THECLAW_CONVERSATION=${scope.threadId} agent memory search helper PIN`, 'agent memory search helper PIN --all', 'agent memory search helper PIN']) {
      const result = await exec(command, { scope: peer });
      expect(result.stdout + result.stderr, command).not.toMatch(/4321|7788/);
    }
  });

  it("a peer's forged attach request for the owner's memory or thread is not taken; a file of its own workdir is", async () => {
    writeFileSync(scope.ownMemory!, 'OWNER-MEMORY\n');
    const thread = openThread(scope.thread!, { home: t.home, create: true });
    thread.close();
    const peer = messageScope(helper, routeMessage(helper, 'per-peer', PEER), false);
    const forged = [scope.ownMemory!, join(scope.thread!, 'events.db')].map((path, i) => `echo '${JSON.stringify({ path })}' > "$THECLAW_OUTBOX/attach-${i}.json"`);
    const result = await exec([...forged, 'echo mine > note.txt', 'agent attach note.txt'].join(' && '), { scope: peer });
    expect(result.exit_code, result.stderr).toBe(0);
    const taken = takeAttachments(t.home, helper, peer.threadId, (path) => turnShows(helper, peer, path));
    expect(taken.attachments.map((attachment) => attachment.name)).toEqual(['note.txt']);
    expect(taken.problems).toEqual([
      expect.stringMatching(/^agent attach: attach-0\.json was not taken: .*user-terminal\.local\.ann\.md is not a file of this conversation's$/),
      expect.stringMatching(/^agent attach: attach-1\.json was not taken: .*events\.db is not a file of this conversation's$/),
    ]);
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

  it("cannot write into the conversation's own thread (thread push is refused, nothing is added), which the runtime writes", async () => {
    const path = scope.thread!;
    const thread = openThread(path, { home: t.home, create: true });
    thread.push({ source: 'self', type: 'message', content: 'MY OWN' });
    thread.close();
    const result = await exec(`thread push --thread ${path} --source self --type message --content planted`);
    expect(result.exit_code).not.toBe(0);
    expect(result.stderr).toContain('read-only');
    expect(threadEvents(t.home, path).map((event) => event.content)).toEqual(['MY OWN']);
  });
});
