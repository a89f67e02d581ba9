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
import connect from 'postgres';
import { askDaemon } from '../src/core/daemon.js';
import { type PostgresCluster, postgresUnavailable, startPostgres } from '../src/testing/postgres.js';
import { now, record } from './measure.js';

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
 * Throughput with 1, 2 and 4 notifier hosts: 24 agents, each asked once at the same moment; the
 * model takes 1 s per call. The agents are spread evenly over the hosts (each agent's directory in
 * its host's home, `agent start` there places it). Each host runs notifier and xgw with a terminal
 * channel, and each agent is asked through its own host's terminal chat, whose replies go out on
 * that host: a reply to a channel owned by another host's gateway needs the agent's directory
 * there (known limits). Done when every conversation's reply is delivered (its outbound consumer
 * acknowledged it, read in the database), after a first round that
 * warms every agent up. Each host runs at most 2 handlers at once, so a host's
 * capacity, not this machine's two cores, is what more hosts add.
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
  const sql = connect(url, { max: 1, onnotice: () => {} });
  const others: NodeJS.ProcessEnv[] = [];
  try {
    limitRuns(system.home);
    await system.must('notifier', ['stop']);
    await system.must('notifier', ['start']);
    for (let index = 2; index <= hosts; index++) others.push(await startHost(system, `h${index}`));
    const envs = [system.env, ...others];
    const agents = Array.from({ length: AGENTS }, (_, i) => ({ id: `w${i + 1}`, env: envs[i % hosts]! }));
    for (const { id, env } of agents) {
      await mustOn(system, env, 'agent', ['init', id]);
      await mustOn(system, env, 'agent', ['start', id]);
    }
    // Each conversation's delivered progress: a round is done when every one has moved on.
    const progress = async () =>
      new Map(
        (
          await sql<{ name: string; progress: number }[]>`
            SELECT t.name, c.progress::int AS progress FROM theclaw.consumers c JOIN theclaw.threads t ON t.thread = c.thread
            WHERE c.consumer = 'outbound' AND t.name LIKE 'agents/w%'`
        ).map((row) => [row.name, row.progress]),
      );
    const round = async (name: string): Promise<number> => {
      const before = await progress();
      const started = now();
      await Promise.all(
        agents.map(({ id, env }, i) =>
          askDaemon(env.THECLAW_HOME!, 'xgw', { op: 'chat_message', channel: 'terminal:local', peer: `p${i}`, agent: id, message_id: `${name}-${i}`, text: `${name} for ${id}` }),
        ),
      );
      const deadline = Date.now() + 120_000;
      for (;;) {
        const after = await progress();
        const moved = [...after].filter(([thread, at]) => at > (before.get(thread) ?? 0)).length;
        if (moved >= AGENTS) return AGENTS / ((now() - started) / 1000);
        if (Date.now() > deadline) throw new Error(`${moved} of ${AGENTS} replies delivered in 120 s`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    await round('warm-up'); // every agent's first turn, its conversation made, its runner warm
    return await round('work');
  } finally {
    await sql.end();
    for (const env of others) {
      await Promise.allSettled([system.run('xgw', ['stop'], undefined, env), system.run('notifier', ['stop'], undefined, env)]);
      rmSync(env.THECLAW_HOME!, { recursive: true, force: true });
    }
    await system.stop();
  }
}

function limitRuns(home: string): void {
  const file = join(home, 'notifier', 'config.yaml');
  writeFileSync(file, `${readFileSync(file, 'utf8')}max_concurrent_runs: ${RUNS_PER_HOST}\n`);
}

/** Another host: a home of its own, the same model and database, notifier, and xgw with its terminal chat. */
async function startHost(system: System, host: string): Promise<NodeJS.ProcessEnv> {
  const home = mkdtempSync(join(tmpdir(), `theclaw-bench-${host}-`));
  for (const dir of ['pai', 'notifier', 'xgw']) mkdirSync(join(home, dir), { mode: 0o700 });
  for (const file of ['pai/config.yaml', 'notifier/config.yaml']) copyFileSync(join(system.home, file), join(home, file));
  writeFileSync(join(home, 'xgw', 'config.yaml'), 'channels:\n  - { id: terminal:local, type: terminal, access: open }\nroutes: []\n');
  const env = { ...system.env, THECLAW_HOME: home, THECLAW_HOST: host };
  await mustOn(system, env, 'notifier', ['start']);
  await mustOn(system, env, 'xgw', ['start']);
  return env;
}

async function mustOn(system: System, env: NodeJS.ProcessEnv, tool: 'agent' | 'notifier' | 'xgw', args: string[]): Promise<void> {
  const result = await system.run(tool, args, undefined, env);
  if (result.code !== 0) throw new Error(`${tool} ${args.join(' ')} on ${env.THECLAW_HOST} exited ${result.code}: ${result.stderr}`);
}
