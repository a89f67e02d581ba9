import { homeRef } from '../../core/layout.js';

/**
 * A thread's name in every store: its path relative to the home (`agents/a/inbox`), absolute for
 * one outside it. A `--thread` path names the same thread whichever store holds it.
 */
export function threadName(home: string, path: string): string {
  return homeRef(home, path);
}
