import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliPath, packageRoot } from '../core/package.js';
import { daemonHolder, type DaemonName } from '../core/daemon.js';
import { sleep } from '../core/retry.js';
import postgres from 'postgres';
import type { CliResult } from './support.js';

/**
 * The chaos test's monkey and its supervisor: a killer that SIGKILLs a random process of one
 * system (found by command line, and by the THECLAW_HOME in its environment, so that another
 * test's processes are never touched), and a supervisor that starts a daemon again once it has
 * died, as systemd or launchd would.
 */
export const VICTIM_KINDS = ['agent run', 'agent deliver', 'runner', 'notifier', 'xgw'] as const;
export type VictimKind = (typeof VICTIM_KINDS)[number];

export interface Victim {
  pid: number;
  kind: VictimKind;
}

/**
 * What a process of the system is, from its argv: `node <dist>/<tool>/cli.js <command> ...`, or
 * notifier's warm runner, in which `agent run` and `agent deliver` run as jobs: killing it kills
 * the job under way.
 */
export function victimKind(argv: readonly string[]): VictimKind | null {
  const [, script, command, flag] = argv;
  if (script === join(packageRoot(), 'dist', 'notifier', 'runner.js')) return 'runner';
  if (script === cliPath('agent') && command === 'run') return 'agent run';
  if (script === cliPath('agent') && command === 'deliver') return 'agent deliver';
  if (command === 'start' && flag === '--foreground') {
    if (script === cliPath('notifier')) return 'notifier';
    if (script === cliPath('xgw')) return 'xgw';
  }
  return null;
}

/** The live processes of the system under `home` that the killer may choose from. */
export function findVictims(home: string): Victim[] {
  const victims: Victim[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const kind = victimKind(readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0'));
      if (kind && readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(`THECLAW_HOME=${home}`)) {
        victims.push({ pid: Number(entry), kind });
      }
    } catch {
      // exited meanwhile, or not ours to read
    }
  }
  return victims;
}

export interface KillerOptions {
  home: string;
  /** Pause between two kills: uniform in [min, max] ms. */
  intervalMs: { min: number; max: number };
}

/**
 * Kills until stopped: every pause, a kind is chosen among those with a live process (so that
 * the daemons, one process each, are hit as often as the many short-lived handlers), then one
 * process of that kind. Counts its kills by kind.
 */
export class Killer {
  readonly kills: Record<VictimKind, number> = { 'agent run': 0, 'agent deliver': 0, runner: 0, notifier: 0, xgw: 0 };
  /** Every kill, in order, with its time (`Date.now()` right after the signal). */
  readonly log: Array<Victim & { at: number }> = [];
  private readonly stopped = new AbortController();
  private readonly loop: Promise<void>;

  constructor(private readonly options: KillerOptions) {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    const { min, max } = this.options.intervalMs;
    for (;;) {
      try {
        await sleep(min + Math.random() * (max - min), this.stopped.signal);
      } catch {
        return;
      }
      const victims = findVictims(this.options.home);
      const kinds = VICTIM_KINDS.filter((kind) => victims.some((victim) => victim.kind === kind));
      if (kinds.length === 0) continue;
      const kind = kinds[Math.floor(Math.random() * kinds.length)]!;
      const ofKind = victims.filter((victim) => victim.kind === kind);
      const victim = ofKind[Math.floor(Math.random() * ofKind.length)]!;
      try {
        process.kill(victim.pid, 'SIGKILL');
        this.kills[kind]++;
        this.log.push({ ...victim, at: Date.now() });
      } catch {
        // it exited on its own meanwhile
      }
    }
  }
}

export interface SupervisorOptions {
  home: string;
  name: DaemonName;
  /** `<name> start` with the system's environment. */
  start(): Promise<CliResult>;
  /** How often to look whether the daemon lives. Default: 50 ms. */
  checkMs?: number;
}

/**
 * Keeps one daemon running: when no live process holds its pid file, `<name> start` again (one
 * start at a time; "already running" is success, a dead holder's pid file and socket are the
 * daemon's own to reclaim). Counts restarts and failed starts (a start can fail when the killer
 * hits the new process).
 */
export class Supervisor {
  restarts = 0;
  failedStarts = 0;
  /** Why starts failed (what `start` said, pids and paths left out), with how often. */
  readonly failures = new Map<string, number>();
  private readonly stopped = new AbortController();
  private readonly loop: Promise<void>;

  constructor(private readonly options: SupervisorOptions) {
    this.loop = this.run();
  }

  /** Whether the daemon's pid file has a live holder now. */
  running(): boolean {
    return daemonHolder(this.options.home, this.options.name) !== null;
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    for (;;) {
      try {
        await sleep(this.options.checkMs ?? 50, this.stopped.signal);
      } catch {
        return;
      }
      if (this.running()) continue;
      const result = await this.options.start();
      if (result.code === 0) this.restarts++;
      else if (!/already running/.test(result.stderr)) {
        this.failedStarts++;
        const why = result.stderr.trim().split('\n').at(-1)!.replace(/\d+/g, 'N').replace(/\/\S+/g, '<path>');
        this.failures.set(why, (this.failures.get(why) ?? 0) + 1);
      }
    }
  }
}

/**
 * A PostgreSQL store's `PRAGMA integrity_check`: amcheck's look at the thread store's tables
 * (`verify_heapam`) and B-tree indexes (`bt_index_check` with every heap tuple looked up), and the
 * store's own invariants: no event or progress past its thread's `last_id`. Each check with what it
 * found, `ok` when nothing. Needs a superuser for the extension (the tests' throwaway cluster).
 */
export async function postgresIntegrity(url: string): Promise<Array<{ check: string; result: string }>> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const found = (rows: readonly object[]) => (rows.length === 0 ? 'ok' : JSON.stringify(rows.slice(0, 5)));
  try {
    await sql`CREATE EXTENSION IF NOT EXISTS amcheck`;
    const relations = await sql<{ name: string; kind: string }[]>`
      SELECT c.oid::regclass::text AS name, c.relkind AS kind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'theclaw' AND (c.relkind = 'r' OR (c.relkind = 'i' AND c.relam = (SELECT oid FROM pg_am WHERE amname = 'btree'))) ORDER BY name`;
    const checks: Array<{ check: string; result: string }> = [];
    for (const { name, kind } of relations) {
      const check = `${kind === 'r' ? 'verify_heapam' : 'bt_index_check'} ${name}`;
      try {
        if (kind === 'i') await sql`SELECT bt_index_check(${name}::regclass, true)`; // raises what it finds
        checks.push({ check, result: found(kind === 'r' ? await sql`SELECT * FROM verify_heapam(${name}::regclass)` : []) });
      } catch (error) {
        checks.push({ check, result: (error as Error).message });
      }
    }
    checks.push({
      check: 'events within their thread',
      result: found(await sql`SELECT t.name, e.id FROM theclaw.events e JOIN theclaw.threads t ON t.thread = e.thread WHERE e.id > t.last_id OR e.id < 1`),
    });
    checks.push({
      check: 'progress within its thread',
      result: found(await sql`SELECT t.name, c.consumer, c.progress FROM theclaw.consumers c JOIN theclaw.threads t ON t.thread = c.thread WHERE c.progress > t.last_id`),
    });
    return checks;
  } finally {
    await sql.end({ timeout: 1 });
  }
}
