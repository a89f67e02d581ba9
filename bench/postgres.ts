/**
 * Issue 26 §3 on this machine: scenarios of `npm run bench` run again with their threads in
 * PostgreSQL, side by side with SQLite, and the work of agents spread over notifier "hosts" —
 * homes of their own, each with its THECLAW_HOST, sharing one database. The cluster is Debian's
 * PostgreSQL with its own durability on (fsync, synchronous commit), as a deployment runs it; its
 * processes count in the CPU and memory figures. Without PostgreSQL these benchmarks say why and
 * record nothing.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSystem, type System } from '../src/e2e/support.js';
import { textUpdate } from '../src/testing/fake-telegram.js';
import { type PostgresCluster, postgresUnavailable, startPostgres } from '../src/testing/postgres.js';
import { now, record, waitUntil } from './measure.js';

/** Where a scenario's threads are. */
export interface StoreUnderTest {
  /** Appended to the figure's name: empty for SQLite, the default. */
  label: string;
  /** For every process of the system. */
  env: NodeJS.ProcessEnv;
  /** The database server's processes, whose CPU and memory are the system's too. */
  serverPids(): number[];
}

export const SQLITE: StoreUnderTest = { label: '', env: {}, serverPids: () => [] };

let cluster: Promise<PostgresCluster> | undefined;

/** One cluster for the whole bench, started at first need. */
async function postgres(): Promise<PostgresCluster | null> {
  const why = postgresUnavailable();
  if (why !== null) {
    console.error(`skip: ${why}`);
    return null;
  }
  cluster ??= startPostgres({ durable: true });
  return cluster;
}

export async function stopPostgres(): Promise<void> {
  await (await cluster)?.stop();
}

/** Runs a scenario with its threads in a fresh database of the bench's cluster. */
export async function onPostgres(name: string, scenario: (store: StoreUnderTest) => Promise<void>): Promise<void> {
  const server = await postgres();
  if (!server) return;
  const url = await server.createDatabase(name);
  await scenario({ label: ' (PostgreSQL)', env: { THECLAW_DATABASE_URL: url }, serverPids: () => [server.serverPid()] });
}

const HOST_COUNTS = [1, 2, 4] as const;
/** Handlers a host runs at once: a host's capacity, the same on every host. */
const RUNS_PER_HOST = 2;
const AGENTS = 24;
const MODEL_DELAY_MS = 1_000;

/**
 * Throughput with 1, 2 and 4 notifier hosts: 24 Telegram peers, each routed to an agent of its
 * own, send one message at once; the model takes 1 s per call. The agents are spread evenly over
 * the hosts (each agent's directory in its host's home, `agent start` there places it); host h1
 * also runs xgw, which owns the channel, so every delivery runs there. Each host runs at most 2
 * handlers at once, so a host's capacity, not this machine's two cores, is what more hosts add.
 */
export async function benchHosts(): Promise<void> {
  const server = await postgres();
  if (!server) return;
  const rates = new Map<number, number>();
  for (const hosts of HOST_COUNTS) {
    const rate = await throughput(server, hosts);
    rates.set(hosts, rate);
    record(
      `PostgreSQL, ${hosts} notifier host${hosts > 1 ? 's' : ''} of ${RUNS_PER_HOST} runs at once, model ${MODEL_DELAY_MS / 1000} s per call: ${AGENTS} messages to ${AGENTS} agents`,
      rate,
      'messages/s',
      { atLeast: 0 },
    );
  }
  record('PostgreSQL, 4 notifier hosts against 1: throughput', rates.get(4)! / rates.get(1)!, '×', { atLeast: 3 });
}

async function throughput(server: PostgresCluster, hosts: number): Promise<number> {
  const url = await server.createDatabase(`hosts_${hosts}`);
  const system = await startSystem({ logLevel: 'info', llm: { defaultDelayMs: MODEL_DELAY_MS }, env: { THECLAW_DATABASE_URL: url, THECLAW_HOST: 'h1' } });
  const others: NodeJS.ProcessEnv[] = [];
  try {
    limitRuns(system.home);
    await system.must('notifier', ['stop']);
    await system.must('notifier', ['start']);
    for (let index = 2; index <= hosts; index++) others.push(await startHost(system, `h${index}`));
    const envs = [system.env, ...others];
    const agents = Array.from({ length: AGENTS }, (_, i) => `w${i + 1}`);
    for (const [i, id] of agents.entries()) {
      const env = envs[i % hosts]!;
      await mustOn(system, env, 'agent', ['init', id]);
      await mustOn(system, env, 'agent', ['start', id]);
    }
    const routes = agents.map((id, i) => `  - { channel: "telegram:main", peer: "${9000 + i}", agent: ${id} }`).join('\n');
    const config = readFileSync(join(system.home, 'xgw', 'config.yaml'), 'utf8').replace('routes:\n', `routes:\n${routes}\n`);
    writeFileSync(join(system.home, 'xgw', 'config.yaml'), config);
    await system.must('xgw', ['stop']);
    await system.must('xgw', ['start']);
    const started = now();
    for (let i = 0; i < AGENTS; i++) system.telegram.queueUpdate(textUpdate({ from: 9000 + i, text: `work for agent ${i + 1}` }));
    await waitUntil(() => system.telegram.sent.length >= AGENTS, 120_000);
    const seconds = (now() - started) / 1000;
    const chats = new Set(system.telegram.sent.map((sent) => String(sent.chat_id)));
    if (chats.size !== AGENTS) throw new Error(`${AGENTS} replies went to ${chats.size} chats`);
    return AGENTS / seconds;
  } finally {
    for (const env of others) {
      await system.run('notifier', ['stop'], undefined, env).catch(() => {});
      rmSync(env.THECLAW_HOME!, { recursive: true, force: true });
    }
    await system.stop();
  }
}

function limitRuns(home: string): void {
  const file = join(home, 'notifier', 'config.yaml');
  writeFileSync(file, `${readFileSync(file, 'utf8')}max_concurrent_runs: ${RUNS_PER_HOST}\n`);
}

/** A host that runs only notifier and its agents: a home of its own, the same model and database. */
async function startHost(system: System, host: string): Promise<NodeJS.ProcessEnv> {
  const home = mkdtempSync(join(tmpdir(), `theclaw-bench-${host}-`));
  for (const dir of ['pai', 'notifier']) mkdirSync(join(home, dir), { mode: 0o700 });
  for (const file of ['pai/config.yaml', 'notifier/config.yaml']) copyFileSync(join(system.home, file), join(home, file));
  const env = { ...system.env, THECLAW_HOME: home, THECLAW_HOST: host };
  await mustOn(system, env, 'notifier', ['start']);
  return env;
}

async function mustOn(system: System, env: NodeJS.ProcessEnv, tool: 'agent' | 'notifier', args: string[]): Promise<void> {
  const result = await system.run(tool, args, undefined, env);
  if (result.code !== 0) throw new Error(`${tool} ${args.join(' ')} on ${env.THECLAW_HOST} exited ${result.code}: ${result.stderr}`);
}
