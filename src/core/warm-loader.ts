/**
 * Set by a warm runner while it imports a CLI module (core/cli.ts `loadProgram`): the module hands
 * its program over instead of running. Apart from cli.ts so that a CLI's thin start (web fetch's
 * client) can tell without loading commander.
 */
export const WARM_LOADER = Symbol.for('theclaw.warm-loader');

/** Whether this module is being imported by a warm runner rather than run as a command. */
export function warmLoading(): boolean {
  return (globalThis as Record<symbol, unknown>)[WARM_LOADER] !== undefined;
}
