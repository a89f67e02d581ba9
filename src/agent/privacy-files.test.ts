import { lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { packageRoot } from '../core/package.js';
import fc from 'fast-check';
import { parse, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { formatMessageContent } from '../core/message.js';
import type { ModelCaller } from '../pai/index.js';
import { BWRAP, createTestHome, NEEDS_BWRAP } from '../testing/index.js';
import { openThread } from '../thread/index.js';
import { conversationWorkdir } from './agent-dir.js';
import { initAgent } from './lifecycle.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { ROUTING_MODES, type RoutingMode } from './types.js';

// TheClaw itself is bound into the sandbox; in a clone under /tmp (as CI's may be) its sources,
// this test's markers among them, are under /tmp too: not a conversation's files.
const SKIP_PACKAGE = packageRoot().startsWith('/tmp/') ? `--exclude-dir=${basename(packageRoot())} ` : '';

// The privacy property of issue 10 (privacy.test.ts), extended to files (issue 20 §2): what a
// turn's shell can read and write. For random conversations — the owner's direct chat, other
// people's, groups, under each routing mode and both sandbox profiles — each message's turn runs,
// in the real bubblewrap, a command that greps the whole home (and /tmp) for every marker, then
// writes a marker into every memory file, every workdir, the threads, sessions, the agent-wide
// search index, the configs and the home. It finds only what its conversation may see — its own
// thread's messages and command records, the agent's memory, its person's or group's memory, its
// workdir, and the owner's files in the owner's direct chat alone — and its markers land only in
// its own memory file (under `sandbox`; the agent's memory and skills too in the owner's direct
// chat) and its workdir. The command spells its markers so that the runtime's records of it hold none of them.

const PEOPLE = ['101', '102', '103'];
const GROUPS = ['-100', '-200'];

interface Message {
  person: string;
  /** 'dm' or a group's chat id. */
  where: string;
}

interface Scenario {
  mode: RoutingMode;
  /** The people listed in policy.owners. */
  owners: string[];
  profile: 'sandbox' | 'workspace-only';
  messages: Message[];
}

const scenario = fc.record({
  mode: fc.constantFrom<RoutingMode>(...ROUTING_MODES),
  owners: fc.subarray(PEOPLE, { maxLength: 1 }),
  profile: fc.constantFrom('sandbox' as const, 'workspace-only' as const),
  messages: fc.array(fc.record({ person: fc.constantFrom(...PEOPLE), where: fc.constantFrom('dm', ...GROUPS) }), { minLength: 2, maxLength: 4 }),
});

const FOUND = /\[\[([a-z0-9-]+)\]\]/g;
const LEFT = /<<(planted|wrote)-m(\d+)>>/g;

function sourceOf(m: Message): string {
  const group = m.where !== 'dm';
  return formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: group ? 'group' : 'dm', conversationId: group ? m.where : m.person, peerId: m.person });
}

/** The test's own account of what each message's turn may see and change, independent of the code. */
function expectations(s: Scenario) {
  const ownerChat = (m: Message) => m.where === 'dm' && s.owners.includes(m.person);
  const conversation = (m: Message) => (m.where !== 'dm' ? `group ${m.where}` : s.mode === 'per-peer' ? `dm ${m.person}` : 'direct messages');
  // A thread several people's direct chats share is no one's own: not readable.
  const threadReadable = (m: Message) => m.where !== 'dm' || s.mode === 'per-peer';
  const workdir = (m: Message) => (ownerChat(m) ? 'owner' : conversation(m));
  const ownMemory = (m: Message) => (m.where !== 'dm' ? `group-memory${m.where}` : s.mode === 'per-peer' ? `user-memory-${m.person}` : null);
  const readsMemory = (m: Message) => ['agent-memory', ...[ownMemory(m) ?? []].flat()];
  const writesMemory = (m: Message) => (s.profile === 'sandbox' ? [ownMemory(m), ownerChat(m) ? 'agent-memory' : null].filter((file) => file !== null) : []);
  return { ownerChat, conversation, threadReadable, workdir, ownMemory, readsMemory, writesMemory };
}

async function check(s: Scenario): Promise<void> {
  const t = createTestHome();
  try {
    mkdirSync(join(t.home, 'pai'));
    writeFileSync(join(t.home, 'pai', 'config.yaml'), 'default: mock/echo\n');
    const admin = await initAgent(t.home, 'admin');
    const other = await initAgent(t.home, 'other');
    const config = parse(readFileSync(admin.config, 'utf8')) as Record<string, unknown>;
    const policy = { owners: s.owners.map((person) => `telegram:main:${person}`), rules: [{ bash: 'allow' }] };
    writeFileSync(admin.config, stringify({ ...config, routing: { default: s.mode }, policy, sandbox: { profile: s.profile, network: false } }));

    // Every memory file, keyed by the marker it starts with; the owner's files; what no turn may read.
    const memory = new Map<string, string>([['agent-memory', join(admin.memory, 'agent.md')]]);
    for (const person of PEOPLE) memory.set(`user-memory-${person}`, join(admin.memory, `user-${routeMessage(admin, 'per-peer', sourceOf({ person, where: 'dm' })).peerKey}.md`));
    for (const group of GROUPS) memory.set(`group-memory${group}`, join(admin.memory, `group-${routeMessage(admin, s.mode, sourceOf({ person: PEOPLE[0]!, where: group })).groupKey}.md`));
    for (const [marker, file] of memory) writeFileSync(file, `<<${marker}>>\n`);
    writeFileSync(join(admin.workdir, 'notes.txt'), '<<owner-file>>\n');
    mkdirSync(join(admin.root, 'index'));
    writeFileSync(join(admin.root, 'index', 'memory.db'), '<<agent-index>>\n');
    writeFileSync(join(other.memory, 'agent.md'), '<<other-agent>>\n');

    const routes = [...PEOPLE.map((person) => ({ person, where: 'dm' })), ...GROUPS.map((where) => ({ person: PEOPLE[0]!, where }))].map((m) => routeMessage(admin, s.mode, sourceOf(m)));
    const targets = [
      ...memory.values(),
      join(admin.memory, 'new.md'),
      join(admin.workdir, 'planted'),
      ...routes.map((route) => join(conversationWorkdir(admin, route.threadId), 'planted')),
      ...routes.map((route) => join(route.path, 'events.db')),
      join(admin.sessions, 'planted.jsonl'),
      join(admin.root, 'index', 'memory.db'),
      admin.config,
      admin.identity,
      join(admin.skills, 'planted.md'),
      join(t.home, 'planted'),
      join(other.memory, 'agent.md'),
    ];
    const found: string[][] = [];
    const caller: ModelCaller = async (request) => {
      const last = request.history.at(-1)!;
      const reply = (text: string, command?: string) => ({
        ok: true as const,
        reply: { text, toolCalls: command ? [{ id: 'probe', name: 'bash_exec', arguments: { command } }] : [], usage: { input: 1, output: 1, cache_read: 0, cache_write: 0, cost: 0 } },
      });
      if (last.role === 'tool') {
        const { stdout } = JSON.parse(last.content) as { stdout: string };
        found.push([...stdout.matchAll(FOUND)].map((match) => match[1]!));
        return reply('done');
      }
      const index = /<<m(\d+)>>/.exec(last.content)![1]!;
      // Markers shown as [[…]] and written as <<$P-m…>>: the records of the command and its output hold none to find.
      const probe = [
        `grep -raoh ${SKIP_PACKAGE}'<<[a-z0-9-]*>>' "$THECLAW_HOME" /tmp 2>/dev/null | sort -u | tr '<>' '[]'`,
        `W=wrote P=planted`,
        `echo "<<$W-m${index}>>" > "wrote-m${index}"`,
        `for path in ${targets.map((path) => `'${path}'`).join(' ')}; do echo "<<$P-m${index}>>" >> "$path"; done 2>/dev/null`,
        'true',
      ].join('\n');
      return reply('', probe);
    };
    for (const [index, m] of s.messages.entries()) {
      const inbox = openThread(admin.inbox, { home: t.home });
      inbox.push({ source: sourceOf(m), type: 'message', content: formatMessageContent({ text: `<<m${index}>>`, attachments: [] }) });
      inbox.close();
      expect(await runAgent('admin', { home: t.home, env: t.env, caller })).toMatchObject({ handled: 1, replied: 1 });
    }

    const e = expectations(s);
    // What each turn read: only what its conversation may see, as it was when it ran.
    expect(found).toHaveLength(s.messages.length);
    for (const [i, m] of s.messages.entries()) {
      const earlier = s.messages.slice(0, i + 1).map((n, j) => ({ n, j }));
      const sameThread = e.threadReadable(m) ? earlier.filter(({ n }) => e.conversation(n) === e.conversation(m)) : [];
      const allowed = new Set([
        ...sameThread.map(({ j }) => `m${j}`),
        ...sameThread.filter(({ j }) => j < i).flatMap(({ j }) => found[j]!),
        ...e.readsMemory(m),
        ...(e.ownerChat(m) ? ['owner-file'] : []),
        ...earlier.filter(({ n, j }) => j < i && e.workdir(n) === e.workdir(m)).flatMap(({ j }) => [`wrote-m${j}`, `planted-m${j}`]),
        ...earlier.filter(({ n, j }) => j < i && e.writesMemory(n).some((file) => e.readsMemory(m).includes(file))).map(({ j }) => `planted-m${j}`),
      ]);
      const what = `message ${i} (${JSON.stringify(m)}) of ${JSON.stringify(s)} found ${found[i]!.join(' ')}`;
      expect(
        found[i]!.filter((marker) => !allowed.has(marker)),
        what,
      ).toEqual([]);
      expect(found[i], what).toContain('agent-memory'); // the probe reads what it may
      if (e.threadReadable(m)) expect(found[i], what).toContain(`m${i}`);
    }

    // What each turn wrote: its workdir, and its own memory file (and the agent's, in the owner's chat) under `sandbox`.
    const workdirOf = (m: Message) => (e.ownerChat(m) ? admin.workdir : conversationWorkdir(admin, routeMessage(admin, s.mode, sourceOf(m)).threadId));
    const left = filesOf(t.home).flatMap((file) => [...readFileSync(file, 'utf8').matchAll(LEFT)].map((match) => ({ file, kind: match[1]!, j: Number(match[2]) })));
    for (const { file, kind, j } of left) {
      const m = s.messages[j]!;
      const places =
        kind === 'wrote'
          ? [join(workdirOf(m), `wrote-m${j}`)]
          : [join(workdirOf(m), 'planted'), ...e.writesMemory(m).map((marker) => memory.get(marker)!), ...(e.ownerChat(m) && s.profile === 'sandbox' ? [join(admin.skills, 'planted.md')] : [])];
      expect(places, `message ${j} (${JSON.stringify(m)}) of ${JSON.stringify(s)} wrote ${relative(t.home, file)}`).toContain(file);
    }
    // And it could write there.
    for (const [j, m] of s.messages.entries()) {
      expect(left, `message ${j} wrote in its workdir`).toContainEqual({ file: join(workdirOf(m), `wrote-m${j}`), kind: 'wrote', j });
      for (const marker of e.writesMemory(m)) expect(left, `message ${j} wrote ${marker}`).toContainEqual({ file: memory.get(marker), kind: 'planted', j });
    }
  } finally {
    t.cleanup();
  }
}

/** Every plain file under `dir`, links not followed. */
function filesOf(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    const stat = lstatSync(path);
    return stat.isDirectory() ? filesOf(path) : stat.isFile() ? [path] : [];
  });
}

describe.skipIf(!BWRAP)(`privacy of files: a turn's shell reads and writes only its conversation's own (${NEEDS_BWRAP})`, () => {
  it('finds no other conversation, person, group or owner file, and writes nowhere but its memory file and workdir, for random conversations (property)', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        await check(s);
      }),
      { numRuns: 6 },
    );
  }, 240_000);

  it("does so for the issue's case: a stranger after the owner, in the owner's direct-chat mode and in a shared one", async () => {
    for (const mode of ['per-peer', 'per-agent'] as const) {
      await check({
        mode,
        owners: ['101'],
        profile: 'sandbox',
        messages: [
          { person: '101', where: 'dm' },
          { person: '102', where: 'dm' },
          { person: '102', where: '-100' },
          { person: '101', where: 'dm' },
        ],
      });
    }
  }, 120_000);
});
