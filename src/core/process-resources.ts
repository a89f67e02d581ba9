/**
 * What a command's process keeps open for its later calls (a PostgreSQL pool, which would keep the
 * process from leaving) and closes when the command is done. A warm runner never closes them: its
 * next jobs use them (core/cli.ts `main`).
 */
const closers = new Set<() => Promise<void>>();

/** Registers `close`, once, to run when a CLI process's command is done. */
export function closeWhenCommandDone(close: () => Promise<void>): void {
  closers.add(close);
}

export async function closeProcessResources(): Promise<void> {
  const open = [...closers];
  closers.clear();
  await Promise.allSettled(open.map((close) => close()));
}
