import type { Command } from 'commander';

/** Builds a tool's commander program without running it. */
export type ProgramFactory = () => Command | Promise<Command>;

/**
 * Every tool's command line, for what spans all tools from outside them: `npm run usage`
 * (scripts/usage.ts), which writes the index cmds reads (src/cmds/own-commands.json), and the
 * tests of that index and of each tool's USAGE.md. Each `program.ts` imports only commander and
 * core/cli (its commands load when an action runs), so building them all costs a few milliseconds.
 * In the order cmds lists them.
 */
export const THECLAW_PROGRAMS: readonly ProgramFactory[] = [
  async () => (await import('../thread/program.js')).createThreadProgram(),
  async () => (await import('../notifier/program.js')).createNotifierProgram(),
  async () => (await import('../pai/program.js')).createPaiProgram(),
  async () => (await import('../xgw/program.js')).createXgwProgram(),
  async () => (await import('../agent/program.js')).createAgentProgram(),
  async () => (await import('../cmds/program.js')).createCmdsProgram(),
  async () => (await import('../web/program.js')).createWebProgram(),
  async () => (await import('../browser/program.js')).createBrowserProgram(),
  async () => (await import('../theclaw/program.js')).createTheclawProgram(),
];

/** Every tool's program, built. */
export function buildPrograms(): Promise<Command[]> {
  return Promise.all(THECLAW_PROGRAMS.map((factory) => factory()));
}
