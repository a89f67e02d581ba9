import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { containedFsHooks, ContainedPathError } from '../core/contained-fs.js';
import { leaveRequest, takeRequests } from '../core/turn-outbox.js';
import {
  BWRAP,
  completionRequests,
  createTestHome,
  NEEDS_BWRAP,
  startFakeOpenAI,
  systemPromptOf,
  threadEvents,
  writeFakePaiConfig,
  type LooseJson,
  type TestHome,
  storedThread,
} from '../testing/index.js';
import { openThread } from '../thread/index.js';
import type { AgentDir } from './agent-dir.js';
import { buildSystemPrompt, memoryFiles } from './context.js';
import { startFreshConversation } from './turn/fresh-conversation.js';
import { initAgent } from './lifecycle.js';
import { MemoryIndex } from './memory/memory-index.js';
import { editMemory, memoryFilesOf } from './memory/memory-search.js';
import { appendNewLines, readMemoryFile, writeSummary } from './memory/memory-store.js';
import { decideProposal, proposedFile, createProposal } from './policy/proposals.js';
import { takeAttachments } from './delivery/reply-files.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { ATTACH_PREFIX, outboxDir } from './policy/sandbox-sends.js';
import { sendToAgent } from './send.js';

// Every reader and writer of the runtime in a directory the agent's sandbox can write, each with
// a planted file link, a planted directory link, and a link swapped in between steps (through
// contained-fs.ts's test seam); and the whole attack through a real sandboxed turn.

const SECRET = 'OPENAI_API_KEY=sk-planted-secret-0001';
const owner = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: userInfo().username, peerId: userInfo().username });

let t: TestHome;
let dir: AgentDir;
let secretFile: string;
let outside: string;

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  secretFile = join(t.home, 'service.env');
  writeFileSync(secretFile, `${SECRET}\n`);
  outside = join(t.home, 'outside');
  mkdirSync(outside);
});
afterEach(() => {
  delete containedFsHooks.beforeOpen;
  t.cleanup();
});

const untouched = () => {
  expect(readFileSync(secretFile, 'utf8')).toBe(`${SECRET}\n`);
  expect(readdirSync(outside)).toEqual([]);
};
/** The directory `folder` (under memory/) as a link to `outside`. */
const plantDirLink = (folder: string) => {
  rmSync(join(dir.memory, folder), { recursive: true, force: true });
  mkdirSync(join(dir.memory, folder, '..'), { recursive: true });
  symlinkSync(outside, join(dir.memory, folder));
};
/** At the step that opens `path`, swaps the directory `folder` for a link to `outside` (the real one moved aside). */
const swapAt = (path: string, folder: string) => {
  containedFsHooks.beforeOpen = (at) => {
    if (!at.startsWith(path)) return;
    delete containedFsHooks.beforeOpen;
    renameSync(folder, `${folder}.moved`);
    symlinkSync(outside, folder);
  };
};
const refusedFor = (run: () => unknown) => {
  expect(run).toThrow(ContainedPathError);
};

describe('the prompt (context.ts)', () => {
  const prompt = () => {
    const route = routeMessage(dir, 'per-peer', owner);
    return buildSystemPrompt({ dir, route, memory: memoryFiles(dir, route), caps: { agent: 1000, person: 1000, conversation: 1000 }, source: owner });
  };

  it('leaves out a memory file that is a link, saying why, and never holds its target', () => {
    symlinkSync(secretFile, join(dir.memory, 'agent.md'));
    const { text, refused } = prompt();
    expect(text).not.toContain('sk-planted');
    expect(refused.map((error) => error.path)).toEqual([join(dir.memory, 'agent.md')]);
  });

  it('names no daily-notes folder that is a link, and leaves out a file swapped for a link just before it is read', () => {
    const route = routeMessage(dir, 'per-peer', owner);
    plantDirLink(join('daily', `user-${route.peerKey}`));
    expect(prompt().text).not.toContain('daily notes');
    writeFileSync(join(dir.memory, 'agent.md'), 'I like tea\n');
    containedFsHooks.beforeOpen = (path) => {
      if (path !== join(dir.memory, 'agent.md')) return;
      rmSync(path);
      symlinkSync(secretFile, path);
    };
    expect(prompt().text).not.toContain('sk-planted');
  });
});

describe('the memory flush and condensing (memory-store.ts)', () => {
  it('refuses to read or append to a memory file that is a link', () => {
    const file = join(dir.memory, 'user-x.md');
    symlinkSync(secretFile, file);
    refusedFor(() => readMemoryFile(dir.root, file));
    refusedFor(() => appendNewLines(dir.root, file, ['- a fact'], '## Noted'));
    untouched();
  });

  it('writes no daily note or archived version through a directory link', () => {
    plantDirLink('daily');
    refusedFor(() => appendNewLines(dir.root, join(dir.memory, 'daily', 'user-x', '2025-01-01.md'), ['- a note'], '## 10:00 UTC'));
    plantDirLink('archive');
    refusedFor(() => writeSummary(dir.root, join(dir.memory, 'archive', 'user-x', 'then.md'), 'old text'));
    expect(readdirSync(outside)).toEqual([]);
  });

  it('writes nothing outside when the daily notes folder is swapped for a link between steps', () => {
    const daily = join(dir.memory, 'daily');
    mkdirSync(join(daily, 'user-x'), { recursive: true });
    const note = join(daily, 'user-x', '2025-01-01.md');
    // Swapped as the note is read: the read goes on in the real folder (held open), the write meets the link.
    swapAt(note, daily);
    refusedFor(() => appendNewLines(dir.root, note, ['- a note'], '## 10:00 UTC'));
    untouched();
  });
});

describe('/new (fresh-conversation.ts)', () => {
  const fresh = async (sentAt = '2025-01-01T00:00:00.000Z') => {
    const route = routeMessage(dir, 'per-peer', owner);
    const thread = openThread(route.path, { home: t.home, create: true });
    try {
      thread.push({ source: owner, type: 'message', content: JSON.stringify({ text: 'hello' }) });
      const commandId = thread.push({ source: owner, type: 'message', content: JSON.stringify({ text: '/new' }) });
      const warnings: string[] = [];
      const run = startFreshConversation({
        command: 'new',
        thread: storedThread(thread),
        threadId: route.threadId,
        memoryDir: dir.memory,
        summaryFile: memoryFiles(dir, route).thread,
        commandId,
        sentAt,
        contextWindow: 100_000,
        mixedPeople: false,
        summarise: async (_system, input) => `summary of: ${input}`,
        redact: (text) => text,
        logger: { warn: (line) => warnings.push(line) },
      });
      return { result: await run.then(String, (error: unknown) => error), warnings, summaryFile: memoryFiles(dir, route).thread };
    } finally {
      thread.close();
    }
  };

  it('never reads a running summary that is a link into the saved one', async () => {
    const route = routeMessage(dir, 'per-peer', owner);
    symlinkSync(secretFile, memoryFiles(dir, route).thread);
    const { result, warnings } = await fresh();
    expect(result).toContain('A summary of the old one is saved');
    expect(warnings.join('\n')).toContain('is a link');
    const saved = readdirSync(join(dir.memory, 'conversations', route.threadId));
    expect(readFileSync(join(dir.memory, 'conversations', route.threadId, saved[0]!), 'utf8')).not.toContain('sk-planted');
    untouched();
  });

  it('saves nothing through memory/conversations or memory/archive planted as links', async () => {
    plantDirLink('conversations');
    expect(await fresh()).toMatchObject({ result: expect.any(ContainedPathError) });
    rmSync(join(dir.memory, 'conversations'));
    plantDirLink('archive');
    const route = routeMessage(dir, 'per-peer', owner);
    writeFileSync(memoryFiles(dir, route).thread, 'the running summary\n');
    expect(await fresh('2025-01-02T00:00:00.000Z')).toMatchObject({ result: expect.any(ContainedPathError) });
    expect(readdirSync(outside)).toEqual([]);
  });

  it('saves nothing outside when memory/conversations is swapped for a link between steps', async () => {
    const conversations = join(dir.memory, 'conversations');
    mkdirSync(conversations);
    swapAt(join(conversations, routeMessage(dir, 'per-peer', owner).threadId), conversations);
    await fresh();
    untouched();
  });
});

describe('agent memory show and search (memory-search.ts, memory-index.ts)', () => {
  it('shows a link as why it is not read, never its target', () => {
    symlinkSync(secretFile, join(dir.memory, 'agent.md'));
    const shown = memoryFilesOf(t.home, 'helper');
    expect(JSON.stringify(shown)).not.toContain('sk-planted');
    expect(shown).toEqual([{ path: 'memory/agent.md', text: expect.stringContaining('is a link — the runtime does not follow links') }]);
  });

  it('opens no link in the editor, and creates a missing file in place', async () => {
    symlinkSync(secretFile, join(dir.memory, 'agent.md'));
    await expect(editMemory(t.home, 'helper', 'memory/agent.md', { EDITOR: 'true' })).rejects.toThrow(ContainedPathError);
    await editMemory(t.home, 'helper', 'memory/user-x.md', { EDITOR: 'true' });
    expect(readFileSync(join(dir.memory, 'user-x.md'), 'utf8')).toBe('');
    untouched();
  });

  it('indexes no memory file that is a link or lies behind one, nor one swapped for a link while it is indexed', async () => {
    symlinkSync(secretFile, join(dir.memory, 'agent.md'));
    plantDirLink('daily');
    writeFileSync(join(outside, 'note.md'), 'sk-planted in a note\n');
    writeFileSync(join(dir.memory, 'user-x.md'), 'harmless\n');
    containedFsHooks.beforeOpen = (path) => {
      if (path !== join(dir.memory, 'user-x.md')) return;
      rmSync(path);
      symlinkSync(secretFile, path);
    };
    const index = MemoryIndex.open(dir);
    try {
      await index.refresh();
      expect(index.search('planted', null, 10)).toEqual([]);
    } finally {
      index.close();
    }
  });

  it('opens no index database through a link in the place of memory.db or its WAL', () => {
    mkdirSync(join(dir.root, 'index'), { recursive: true });
    const victim = join(outside, 'victim.db');
    symlinkSync(victim, join(dir.root, 'index', 'memory.db'));
    expect(() => MemoryIndex.open(dir)).toThrow(ContainedPathError);
    rmSync(join(dir.root, 'index', 'memory.db'));
    symlinkSync(victim, join(dir.root, 'index', 'memory.db-wal'));
    expect(() => MemoryIndex.open(dir)).toThrow(ContainedPathError);
    expect(readdirSync(outside)).toEqual([]);
  });
});

describe('proposals (the evolver reads and writes memory/agent.md)', () => {
  it('reads a linked memory/agent.md as empty, and applying replaces the link without writing through it', () => {
    symlinkSync(secretFile, join(dir.memory, 'agent.md'));
    expect(proposedFile(dir, 'memory/agent.md').text).toBe('');
    const proposal = createProposal(dir, { file: 'memory/agent.md', summary: 'learned', text: '# learned\n' });
    const outcome = decideProposal(t.home, dir, proposal, true, 'owner');
    expect(outcome.decision.outcome).toBe('applied');
    expect(readFileSync(join(dir.memory, 'agent.md'), 'utf8')).toBe('# learned\n');
    expect(readFileSync(outcome.before, 'utf8')).toBe('');
    untouched();
  });
});

describe('agent attach (reply-files.ts) and the outbox (core/turn-outbox.ts)', () => {
  const attach = (path: string) => {
    leaveRequest(outboxDir(dir, 'c1'), ATTACH_PREFIX, { path });
    return takeAttachments(t.home, dir, 'c1');
  };

  it('takes no file that is a link, lies behind one, or is swapped for one after it was checked', () => {
    symlinkSync(secretFile, join(dir.workdir, 'report.txt'));
    expect(attach(join(dir.workdir, 'report.txt'))).toMatchObject({ attachments: [], problems: [expect.stringContaining('is a link')] });
    mkdirSync(join(outside, 'sub'));
    writeFileSync(join(outside, 'sub', 'x.txt'), SECRET);
    symlinkSync(join(outside, 'sub'), join(dir.workdir, 'sub'));
    expect(attach(join(dir.workdir, 'sub', 'x.txt'))).toMatchObject({ attachments: [], problems: [expect.stringContaining('is a link')] });
    writeFileSync(join(dir.workdir, 'real.txt'), 'fine');
    containedFsHooks.beforeOpen = (path) => {
      // The check looks at it without opening it: this is the read, after the check.
      if (path !== join(dir.workdir, 'real.txt')) return;
      rmSync(path);
      symlinkSync(secretFile, path);
    };
    expect(attach(join(dir.workdir, 'real.txt'))).toMatchObject({ attachments: [], problems: [expect.stringContaining('is a link')] });
  });

  it('takes no request that is a link, and removes a planted directory without following a link in it', () => {
    const outbox = outboxDir(dir, 'c1');
    mkdirSync(outbox, { recursive: true });
    writeFileSync(join(outside, 'keep.txt'), 'keep');
    symlinkSync(secretFile, join(outbox, 'timer-1.json'));
    mkdirSync(join(outbox, 'timer-2.json'));
    symlinkSync(outside, join(outbox, 'timer-2.json', 'inner'));
    const taken = takeRequests(
      outbox,
      () => true,
      (json) => json,
    );
    expect(taken.requests).toEqual([]);
    expect(taken.problems).toHaveLength(2);
    expect(readdirSync(outbox)).toEqual([]);
    expect(readFileSync(join(outside, 'keep.txt'), 'utf8')).toBe('keep');
    expect(readFileSync(secretFile, 'utf8')).toBe(`${SECRET}\n`);
  });
});

// Since a turn's sandbox binds the memory files one by one (sandbox-profile.ts), even the owner's
// turn cannot put a link in their place: a bound file is a mount point, and memory/ itself is
// read-only. The readers' and writers' own refusal is tested above with links planted outside.
describe('a sandboxed turn tries to plant the links (real bubblewrap)', () => {
  it.skipIf(!BWRAP)(`cannot, and the secret reaches no later model request; /new writes nothing outside (${NEEDS_BWRAP})`, async () => {
    const plant = [
      'ln -sf "$THECLAW_HOME/service.env" "$THECLAW_AGENT_DIR/memory/agent.md"',
      'rm -rf "$THECLAW_AGENT_DIR/memory/conversations"',
      `ln -s ${JSON.stringify(outside)} "$THECLAW_AGENT_DIR/memory/conversations"`,
      'ls -l "$THECLAW_AGENT_DIR/memory"',
    ].join('; ');
    const server = await startFakeOpenAI({
      defaultStep: (request) => {
        const messages: LooseJson[] = request.body?.messages ?? [];
        const last = messages.at(-1);
        if (!Array.isArray(request.body?.tools) || request.body.tools.length === 0) return { kind: 'text', text: 'A summary.' };
        if (last?.role === 'user' && String(last.content).includes('plant')) return { kind: 'tool_call', name: 'bash_exec', arguments: { command: plant } };
        if (last?.role === 'tool') return { kind: 'text', text: `planted: ${String(last.content).includes('agent.md ->')}` };
        return { kind: 'text', text: 'ok' };
      },
    });
    try {
      writeFakePaiConfig(t.home, server);
      for (const text of ['plant the links', 'what do you remember?', '/new']) {
        await sendToAgent(t.home, 'helper', { text, source: owner });
        expect(await runAgent('helper', { home: t.home, env: t.env })).toMatchObject({ handled: 1 });
      }
      const replies = threadEvents(t.home, routeMessage(dir, 'per-peer', owner).path, "type = 'message' AND source = 'self'").map((event) => JSON.parse(event.content).text as string);
      expect(replies[0]).toBe('planted: false');
      for (const name of ['agent.md', 'conversations']) expect(existsSync(join(dir.memory, name)) && lstatSync(join(dir.memory, name)).isSymbolicLink(), name).toBe(false);
      const requests = completionRequests(server);
      expect(requests.length).toBeGreaterThanOrEqual(3);
      for (const request of requests) expect(JSON.stringify(request.body)).not.toContain('sk-planted');
      const asked = requests.find((request) => Array.isArray(request.body.tools) && JSON.stringify(request.body.messages).includes('what do you remember?'))!;
      expect(systemPromptOf(asked)).not.toContain('What I have learned');
      expect(readdirSync(outside)).toEqual([]);
    } finally {
      await server.close();
    }
  });
});
