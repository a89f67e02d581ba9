/**
 * Issue 26 §3 on this machine: scenarios of `npm run bench` run again with their threads in
 * PostgreSQL, side by side with SQLite, and the work of agents spread over notifier "hosts" —
 * homes of their own, each with its THECLAW_HOST, sharing one database. The cluster is Debian's
 * PostgreSQL with its own durability on (fsync, synchronous commit), as a deployment runs it; its
 * processes count in the CPU and memory figures. Without PostgreSQL these benchmarks say why and
 * record nothing.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSystem, type System } from '../src/e2e/support.js';
import connect from 'postgres';
import { askDaemon } from '../src/core/daemon.js';
import { type PostgresCluster, postgresUnavailable, startPostgres } from '../src/testing/postgres.js';
import { cpuSeconds, daemonPid, now, processTree, record } from './measure.js';

/** Where a scenario's threads are. */
export interface StoreUnderTest {
  /** Appended to the figure's name: empty for SQLite, the default. */
  label: string;
  /** For every process of the system. */
  env: NodeJS.ProcessEnv;
  /** The database server's processes, whose CPU and memory are the system's too. */
  serverPids(): number[];
  /** PostgreSQL's: the statements the system's database has run so far (pg_stat_statements). */
  statements?(): Promise<number>;
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
  cluster ??= startPostgres({ durable: true, statementStats: true }).then(async (started) => {
    const sql = connect(started.url, { max: 1, onnotice: () => {} });
    await sql`CREATE EXTENSION pg_stat_statements`;
    await sql.end();
    return started;
  });
  return cluster;
}

/** Statements run in the database so far, begin and commit included; counted from another database, so that counting adds none. */
async function statementsIn(server: PostgresCluster, database: string): Promise<number> {
  const sql = connect(server.url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql<{ calls: number }[]>`
      SELECT coalesce(sum(s.calls), 0)::int AS calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = ${database}`;
    return row!.calls;
  } finally {
    await sql.end();
  }
}

export async function stopPostgres(): Promise<void> {
  await (await cluster)?.stop();
}

/** Runs a scenario with its threads in a fresh database of the bench's cluster. */
export async function onPostgres(name: string, scenario: (store: StoreUnderTest) => Promise<void>): Promise<void> {
  const server = await postgres();
  if (!server) return;
  const url = await server.createDatabase(name);
  await scenario({ label: ' (PostgreSQL)', env: { THECLAW_DATABASE_URL: url }, serverPids: () => [server.serverPid()], statements: () => statementsIn(server, name) });
}

const HOST_COUNTS = [1, 2, 4] as const;
/** Handlers a host runs at once: a host's capacity, the same on every host (`BENCH_RUNS_PER_HOST` to try another). */
const RUNS_PER_HOST = Number(process.env.BENCH_RUNS_PER_HOST ?? 2);
const AGENTS = 24;
const MODEL_DELAY_MS = 1_000;
/** Sustained load before the window (runners started, queues full), and the window measured. */
const RAMP_MS = 5_000;
const WINDOW_MS = 20_000;

/**
 * Throughput with 1, 2 and 4 notifier hosts: 24 agents, the model taking 1 s per call. The agents
 * are spread evenly over the hosts (each agent's directory in its host's home, `agent start` there
 * places it). Each host runs notifier and xgw with a terminal channel, and each agent is asked
 * through its own host's terminal chat, whose replies go out on that host: a reply to a channel
 * owned by another host's gateway needs the agent's directory there (known limits). A reply counts
 * when its conversation's delivery is acknowledged (the outbound consumer's progress, read in the
 * database).
 *
 * After a first round that warms every agent up, each agent is asked again as soon as its reply
 * was delivered, so that work always waits on every host; the figure is the replies delivered in
 * a 20 s window after a 5 s ramp, per second: the sustained rate, without the start of a burst
 * and its tail. Each host runs at most 2 handlers at once (its inbox runs and its deliveries
 * together), so a host's capacity, not this machine's two cores, is what more hosts add; the CPU
 * of every process of the system (each host's notifier, runners, handlers and xgw, and the
 * database server) over the window, per reply and per second (cores busy), says when the two
 * cores are what limits instead.
 */
export async function benchHosts(): Promise<void> {
  const server = await postgres();
  if (!server) return;
  const rates = new Map<number, number>();
  for (const hosts of HOST_COUNTS) {
    const { rate, cpuPerReply } = await throughput(server, hosts);
    rates.set(hosts, rate);
    const setup = `PostgreSQL, ${hosts} notifier host${hosts > 1 ? 's' : ''} of ${RUNS_PER_HOST} runs at once, model ${MODEL_DELAY_MS / 1000} s per call, ${AGENTS} agents asked again on each reply`;
    record(`${setup}: replies per second (${WINDOW_MS / 1000} s window)`, rate, 'messages/s', { atLeast: 0 });
    record(`${setup}: CPU of every process of the system per reply`, cpuPerReply, 'CPU-s', { atLeast: 0 });
    record(`${setup}: cores busy (CPU per reply × replies per second, of ${cpus().length})`, cpuPerReply * rate, 'cores', { atLeast: 0 });
  }
  record('PostgreSQL, 4 notifier hosts against 1: throughput', rates.get(4)! / rates.get(1)!, '×', { atLeast: 3 });
}

async function throughput(server: PostgresCluster, hosts: number): Promise<{ rate: number; cpuPerReply: number }> {
  const url = await server.createDatabase(`hosts_${hosts}_${RUNS_PER_HOST}`);
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
    // Each agent's delivered progress (its one conversation's outbound consumer).
    const progress = async () =>
      new Map(
        (
          await sql<{ agent: string; progress: number }[]>`
            SELECT split_part(t.name, '/', 2) AS agent, c.progress::int AS progress FROM theclaw.consumers c JOIN theclaw.threads t ON t.thread = c.thread
            WHERE c.consumer = 'outbound' AND t.name LIKE 'agents/w%'`
        ).map((row) => [row.agent, row.progress]),
      );
    let asked = 0;
    const ask = ({ id, env }: (typeof agents)[number]) =>
      askDaemon(env.THECLAW_HOME!, 'xgw', { op: 'chat_message', channel: 'terminal:local', peer: `p-${id}`, agent: id, message_id: `m${++asked}`, text: `message ${asked} for ${id}` });
    /** Asks every agent, then each again on its reply while `more(now)`; resolves with each reply's time once all asked are answered. */
    const load = async (more: (at: number) => boolean): Promise<number[]> => {
      const replies: number[] = [];
      const last = await progress();
      await Promise.all(agents.map(ask));
      const waiting = new Set(agents.map((agent) => agent.id));
      const deadline = Date.now() + 180_000;
      while (waiting.size > 0) {
        if (Date.now() > deadline) throw new Error(`${waiting.size} of ${AGENTS} replies not delivered in 180 s`);
        await new Promise((resolve) => setTimeout(resolve, 20));
        const at = now();
        for (const [agent, delivered] of await progress()) {
          if (!waiting.has(agent) || delivered <= (last.get(agent) ?? 0)) continue;
          replies.push(at);
          last.set(agent, delivered);
          if (more(at)) await ask(agents.find((a) => a.id === agent)!);
          else waiting.delete(agent);
        }
      }
      return replies;
    };
    await load(() => false); // every agent's first turn, its conversation made, runners warm
    const roots = () => [...envs.flatMap((env) => [daemonPid(env.THECLAW_HOME!, 'notifier'), daemonPid(env.THECLAW_HOME!, 'xgw')]), server.serverPid()];
    const started = now();
    const window = { from: started + RAMP_MS, to: started + RAMP_MS + WINDOW_MS };
    const cpuAt = (ms: number) => new Promise<number>((resolve) => setTimeout(() => resolve(cpuSeconds(processTree(roots()))), ms));
    const cpu = Promise.all([cpuAt(RAMP_MS), cpuAt(RAMP_MS + WINDOW_MS)]);
    const replies = await load((at) => at < window.to);
    const [cpuFrom, cpuTo] = await cpu;
    const counted = replies.filter((at) => at >= window.from && at < window.to).length;
    return { rate: counted / (WINDOW_MS / 1000), cpuPerReply: (cpuTo - cpuFrom) / counted };
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
