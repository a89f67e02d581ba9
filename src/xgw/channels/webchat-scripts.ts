import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClawError } from '../../core/errors.js';
import { packageRoot } from '../../core/package.js';
import { PAGE_SCRIPTS } from './webchat-protocol.js';

/**
 * The pages' scripts (src/xgw/page/), as tsup bundled them into dist/page/, by the path the
 * server serves each at. Read when the channel starts, so a missing build is said at once.
 */
export function loadPageScripts(): Record<string, string> {
  const dir = join(packageRoot(), 'dist', 'page');
  return Object.fromEntries(
    Object.entries(PAGE_SCRIPTS).map(([name, path]) => {
      const file = join(dir, `${name}.global.js`);
      try {
        return [path, readFileSync(file, 'utf8')];
      } catch (error) {
        throw new ClawError('invalid', `the web chat page's script ${file} cannot be read`, { suggestion: 'build TheClaw again: npm run build', cause: error });
      }
    }),
  );
}
