import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { userInfo } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { setYamlConfigKey } from '../core/config.js';
import { request } from '../core/ipc.js';
import { createLogger } from '../core/logger.js';
import { BWRAP, createTestHome, NEEDS_BWRAP, startFakeOpenAI, writeFakePaiConfig, type FakeLlmServer, type LooseJson, type TestHome } from '../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import { agentDir, conversationIndexFolder, type AgentDir } from './agent-dir.js';
import { initAgent, startAgent } from './lifecycle.js';
import { runHeartbeat } from './proactive/heartbeat.js';
import { openMemoryDoors, type MemoryDoors } from './memory/memory-door.js';
import { searchMemory } from './memory/memory-search.js';
import { messageScope } from './policy/index.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { sendToAgent } from './send.js';
import { closeThreadStores, openAgentThread } from './threads.js';
import type { ThreadRoute } from './types.js';

// `agent memory search` on a home whose threads are in PostgreSQL: there are no thread files, and
// the store's URL never enters a turn's sandbox, so a turn's search asks its run through a socket
// of its conversation's own (memory-door.ts); at the terminal the search reads the store. One
// cluster; the model a loopback fake whose script runs the commands in real bubblewrap.

const unavailable = postgresUnavailable();
let cluster: PostgresCluster | undefined;
let server: FakeLlmServer;
let t: TestHome;
let env: NodeJS.ProcessEnv;
let helper: AgentDir;
let doors: MemoryDoors;

const address = (who: string, conversationType: 'dm' | 'group' = 'dm', conversation = who) =>
  formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType, conversationId: conversation, peerId: who });
const owner = address(userInfo().username);
const bob = address('bob');
/** The commands the model runs in its next turn, one per tool call; then it answers. */
let commands: string[] = [];

beforeAll(async () => {
  if (unavailable) return;
  cluster = await startPostgres();
  t = createTestHome();
  env = { ...t.env, THECLAW_DATABASE_URL: await cluster.createDatabase('memory') };
  server = await startFakeOpenAI({
    defaultStep: (asked) => {
      const done = ((asked.body?.messages ?? []) as LooseJson[]).filter((message) => message.role === 'tool').length;
      const command = commands[done];
      return command ? { kind: 'tool_call', name: 'bash_exec', arguments: { command } } : { kind: 'text', text: 'Noted.' };
    },
  });
  writeFakePaiConfig(t.home, server, { contextWindow: 100_000 });
  helper = await initAgent(t.home, 'helper', {}, env);
  doors = openMemoryDoors(t.home, helper, env, createLogger(helper.log));
  // Earlier conversations: bob's, and a thread several people share.
  await said(routeMessage(helper, 'per-peer', bob), bob, 'My locker code is Ostrich.');
  await said(routeMessage(helper, 'per-channel', bob), bob, 'The shared Ostrich thread.');
}, 60_000);

afterAll(async () => {
  await doors?.close();
  await closeThreadStores();
  await server?.close();
  t?.cleanup();
  await cluster?.stop();
});

async function said(route: ThreadRoute, source: string, text: string): Promise<void> {
  const thread = await openAgentThread(t.home, route.path, { create: true }, env);
  await thread.append([{ source, type: 'message', content: JSON.stringify({ text, attachments: [] }) }]);
  await thread.close();
}

/** What the commands of the last turn printed, as the model's last request carries it. */
function printed(): { stdout: string; stderr: string; exit_code: number }[] {
  const calls = server.requests.filter((asked) => asked.path === '/v1/chat/completions');
  return (calls.at(-1)!.body.messages as LooseJson[]).filter((message) => message.role === 'tool').map((message) => JSON.parse(String(message.content)));
}

describe.skipIf(unavailable !== null)(`memory search on a PostgreSQL store${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  it.skipIf(!BWRAP)(`finds in a sandboxed turn what was said earlier in the conversation, through its run, without the store's URL (${NEEDS_BWRAP})`, async () => {
    commands = [];
    await sendToAgent(t.home, 'helper', { text: 'My boat is called Marguerite.', source: owner, env });
    expect(await runAgent('helper', { home: t.home, env })).toMatchObject({ handled: 1, replied: 1 });
    const bobs = routeMessage(helper, 'per-peer', bob).threadId;
    commands = ['agent memory search helper Marguerite', 'agent memory search helper Ostrich', `THECLAW_CONVERSATION=${bobs} agent memory search helper Ostrich`, 'env'];
    await sendToAgent(t.home, 'helper', { text: 'What is my boat called?', source: owner, env });
    expect(await runAgent('helper', { home: t.home, env })).toMatchObject({ handled: 1, replied: 1 });
    const [found, others, claimed, environment] = printed();
    expect(found, found?.stderr).toMatchObject({ exit_code: 0 });
    expect(found!.stdout).toMatch(/^peer-terminal\.local\.\S+ #1 \S+ from external:terminal:local:dm:\S+\n {2}My boat is called Marguerite\.$/m);
    expect(found!.stdout).not.toContain('What is my boat called'); // the message it answers
    expect(others).toMatchObject({ exit_code: 0, stdout: 'nothing found\n' }); // bob's conversation is not this one
    expect(claimed).toMatchObject({ exit_code: 0, stdout: 'nothing found\n' }); // nor by its command's say: the socket is this conversation's
    expect(environment!.stdout).toMatch(/^THECLAW_MEMORY_SOCKET=/m);
    expect(environment!.stdout).not.toContain('THECLAW_DATABASE_URL');
    expect(environment!.stdout).not.toContain(env.THECLAW_DATABASE_URL);
  });

  it("answers on a conversation's socket that conversation's search alone, refusing any other request", async () => {
    const route = routeMessage(helper, 'per-peer', bob);
    const socket = (await doors.socketFor(route.threadId, messageScope(helper, route, false).thread))!;
    expect(await doors.socketFor(route.threadId, route.path)).toBe(socket); // one per conversation
    const hits = await request<{ where: string; text: string }[]>(socket, { op: 'search', query: 'Ostrich', limit: 5 });
    expect(hits.map((hit) => [hit.where, hit.text])).toEqual([[route.threadId, 'My locker code is Ostrich.']]);
    // The request names no conversation, agent or path, and asks for nothing but a search.
    for (const hostile of [
      { op: 'search', query: 'Ostrich', limit: 5, conversation: 'peer-terminal.local.ann' },
      { op: 'search', query: 'Ostrich', limit: 5, agent: 'other' },
      { op: 'peek', thread: 'agents/other/inbox' },
      { op: 'search', query: 'Ostrich', limit: 1_000_000 },
    ]) {
      await expect(request(socket, hostile)).rejects.toMatchObject({ kind: 'usage', message: expect.stringMatching(/^invalid memory search request/) });
    }
    // A thread several people share is not its conversation's own: its sandbox sees it not, nor
    // does its search, even once the agent's index holds it (a search at the terminal).
    expect(await searchMemory(t.home, 'helper', 'shared', { all: true }, env)).toHaveLength(1);
    const shared = routeMessage(helper, 'per-channel', bob);
    const sharedSocket = (await doors.socketFor(shared.threadId, messageScope(helper, shared, false).thread))!;
    expect(sharedSocket).not.toBe(socket);
    expect(await request(sharedSocket, { op: 'search', query: 'Ostrich shared', limit: 5 })).toEqual([]);
    // The run searched the agent's index, not the conversations' (their sandboxes write those).
    expect(existsSync(conversationIndexFolder(helper, route.threadId))).toBe(false);
  });

  it.skipIf(!BWRAP)(`finds in a heartbeat's sandboxed search the agent's memory, and no conversation's thread (${NEEDS_BWRAP})`, async () => {
    commands = [];
    await sendToAgent(t.home, 'helper', { text: 'My boat is called Marguerite.', source: owner, env });
    await runAgent('helper', { home: t.home, env }); // the owner's direct chat, where a finding goes
    await startAgent(t.home, 'helper', env);
    setYamlConfigKey(helper.config, 'heartbeat', { every: '30m' });
    writeFileSync(join(helper.memory, 'agent.md'), 'The lighthouse opens at nine.\n');
    commands = ['agent memory search helper lighthouse', 'agent memory search helper Marguerite'];
    expect(await runHeartbeat('helper', { home: t.home, env })).toMatchObject({ outcome: 'told_owner' });
    const [found, conversation] = printed();
    expect(found, found?.stderr).toMatchObject({ exit_code: 0, stdout: expect.stringContaining('The lighthouse opens at nine.') });
    expect(conversation).toMatchObject({ exit_code: 0, stdout: 'nothing found\n' });
  });

  it("searches every conversation's thread in the database from the terminal", async () => {
    const hits = await searchMemory(t.home, 'helper', 'Ostrich', { all: true }, env);
    expect(hits.map((hit) => hit.text).sort()).toEqual(['My locker code is Ostrich.', 'The shared Ostrich thread.']);
    expect(await searchMemory(t.home, 'helper', 'Ostrich', { peer: routeMessage(agentDir(t.home, 'helper'), 'per-peer', bob).threadId }, env)).toHaveLength(1);
  });
});
