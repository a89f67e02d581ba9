import { existsSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { createTestHome, startFakeOpenAI, writeFakePaiConfig, type FakeLlmServer, type TestHome } from '../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import { openStoreAt, threadName, type ThreadStore } from '../thread/index.js';
import { agentDir } from './agent-dir.js';
import { deliverReplies } from './delivery/deliver.js';
import { initAgent, startAgent } from './lifecycle.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { sendToAgent } from './send.js';
import { closeThreadStores } from './threads.js';

// The agent runtime on a home whose threads are in PostgreSQL (THECLAW_DATABASE_URL): `agent run`
// and `agent deliver` in-process against a throwaway cluster, the model a loopback fake speaking
// the OpenAI wire protocol. Every thread is read back through the store; none is a file.

const unavailable = postgresUnavailable();
let cluster: PostgresCluster | undefined;
let server: FakeLlmServer;
let t: TestHome;
let env: NodeJS.ProcessEnv;
let store: ThreadStore;
let admin: postgres.Sql;

const person = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: 'ann', peerId: 'ann' });

beforeAll(async () => {
  if (unavailable) return;
  cluster = await startPostgres();
  const url = await cluster.createDatabase('agents');
  t = createTestHome();
  env = { ...t.env, THECLAW_DATABASE_URL: url };
  server = await startFakeOpenAI({ defaultStep: { kind: 'text', text: 'pong' } });
  writeFakePaiConfig(t.home, server);
  store = await openStoreAt(url);
  admin = postgres(url, { max: 1, onnotice: () => {} });
  for (const id of ['helper', 'asker']) {
    await initAgent(t.home, id, {}, env);
    await startAgent(t.home, id, env);
  }
}, 60_000);

afterAll(async () => {
  await admin?.end();
  await store?.close();
  await closeThreadStores();
  await server?.close();
  t?.cleanup();
  await cluster?.stop();
});

/** The messages of a thread, read through the store. */
async function messages(path: string): Promise<{ source: string; text: string; content: string }[]> {
  const thread = await store.open(threadName(t.home, path));
  try {
    return (await thread.peek({ filter: "type = 'message'" })).map((event) => ({ source: event.source, text: parseMessageContent(event.content).text, content: event.content }));
  } finally {
    await thread.close();
  }
}

describe.skipIf(unavailable !== null)(`an agent whose threads are in PostgreSQL${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  it('answers a message of its inbox into its conversation thread there, once however often it was pushed', async () => {
    const inbox = await store.open('agents/helper/inbox');
    const message = { source: person, type: 'message', content: JSON.stringify({ text: 'ping', attachments: [] }), idempotency_key: 'xgw:ann:1' };
    await inbox.append([message]);
    await inbox.append([message]); // the gateway's retry of the same message
    expect(await runAgent('helper', { home: t.home, env })).toMatchObject({ handled: 1, replied: 1, errors: 0 });
    // Acknowledged once the run is over (a warm runner's job ends there, and notifier checks it).
    expect(await inbox.consumer('inbox')).toMatchObject({ progress: 1, pending: 0 });
    await inbox.close();
    expect(await runAgent('helper', { home: t.home, env })).toMatchObject({ handled: 0 });

    const route = routeMessage(agentDir(t.home, 'helper'), 'per-peer', person);
    expect((await messages(route.path)).map(({ source, text }) => [source, text])).toEqual([
      [person, 'ping'],
      ['self', 'pong'],
    ]);
    // Nothing of it on disk: the home holds the agent's files, the database its threads.
    expect(existsSync(join(route.path, 'events.db'))).toBe(false);
    expect(existsSync(join(agentDir(t.home, 'helper').inbox, 'events.db'))).toBe(false);
    const conversation = await store.open(threadName(t.home, route.path));
    expect(await conversation.consumer('outbound')).toMatchObject({ subscribed: true, pending: 1 });
    await conversation.close();
    // A terminal chat is each host's own: its replies go out on the agent's host.
    const runOn = await admin<{ consumer: string; run_on: string }[]>`
      SELECT c.consumer, c.run_on FROM theclaw.consumers c JOIN theclaw.threads t ON t.thread = c.thread
      WHERE t.name IN ('agents/helper/inbox', ${threadName(t.home, route.path)}) ORDER BY c.consumer`;
    expect(runOn).toEqual([
      { consumer: 'inbox', run_on: 'agent:helper' },
      { consumer: 'outbound', run_on: 'agent:helper' },
    ]);
  });

  it("delivers an answer to another agent into that agent's inbox there, once", async () => {
    // asker's command asks helper (agent send, from asker's conversation with ann).
    const askEnv = { ...env, THECLAW_AGENT: 'asker', THECLAW_CONVERSATION: 'peer-terminal.local.ann', THECLAW_ASKING_EVENT: '1' };
    await sendToAgent(t.home, 'helper', { text: 'what is 6*7?', env: askEnv });
    await runAgent('helper', { home: t.home, env });
    const question = (await messages(agentDir(t.home, 'helper').inbox)).at(-1)!;
    const asked = routeMessage(agentDir(t.home, 'helper'), 'per-peer', question.source);
    // Notifier names a PostgreSQL thread by its name relative to the home.
    const handlerEnv = { ...env, THECLAW_THREAD: threadName(t.home, asked.path) };
    for (let n = 0; n < 2; n++) expect(await deliverReplies({ consumer: 'outbound', home: t.home, env: handlerEnv })).toMatchObject({ failed: false });

    const answers = (await messages(agentDir(t.home, 'asker').inbox)).filter((message) => message.source.startsWith('internal:'));
    expect(answers.map(({ text }) => text)).toEqual(['pong']);
    expect(parseMessageContent(answers[0]!.content).reply_context).toMatchObject({ kind: 'internal', agent_id: 'helper', conversation_id: 'peer-terminal.local.ann', asking_event_id: 1 });
  });
});
