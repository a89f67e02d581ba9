/** What notifier's runner pool and a warm runner (runner.ts) say to each other over IPC. */
export interface RunnerJob {
  type: 'job';
  id: number;
  /** Absolute path of the CLI module (`dist/<tool>/cli.js`). */
  cli: string;
  args: string[];
  env: Record<string, string>;
}

/** What the pool sends a runner. */
export type RunnerCommand =
  | RunnerJob
  /** Load this CLI module now, before a job needs it. */
  | { type: 'preload'; cli: string }
  /** Leave once the job under way (if any) has ended. */
  | { type: 'leave' };

/** What a runner sends the pool. */
export type RunnerMessage =
  | { type: 'ready' }
  /** The job ended with this exit code; `rss` lets the pool retire a runner that grew. */
  | { type: 'done'; id: number; code: number; rss: number };
