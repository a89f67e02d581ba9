import { readStdin } from '../core/cli.js';
import { errorToJson, isClawError, usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { PRIVATE_UMASK } from '../core/private-home.js';
import { closeProcessResources } from '../core/process-resources.js';
import { parseControlAction, type RunnerAnswer } from '../xgw/control-source.js';
import type { ControlOutcome } from '../xgw/index.js';
import { controlAction, controlView } from './control.js';
import { conversationView } from './control-conversations.js';

/**
 * The control runner (`dist/theclaw/control-runner.js`): the web chat's server starts it for each
 * request of the owner's control page (xgw/control-source.ts), one RunnerRequest as JSON on stdin,
 * and reads one RunnerAnswer from stdout. Not a command of `theclaw`: nothing but the page asks it.
 */
async function answer(): Promise<RunnerAnswer> {
  try {
    const home = resolveHome();
    const text = (await readStdin(usageError('no request', 'give the request as JSON on stdin'))).toString('utf8');
    let request: { op?: unknown; action?: unknown; agent?: unknown; thread?: unknown } | null;
    try {
      request = JSON.parse(text) as typeof request;
    } catch {
      throw usageError('the request is not JSON', 'see RunnerRequest in src/xgw/control-source.ts');
    }
    if (request?.op === 'view') return { ok: true, value: await controlView(home) };
    if (request?.op === 'conversation') return { ok: true, value: await conversationView(home, String(request.agent), String(request.thread)) };
    if (request?.op === 'act') {
      const { text } = await controlAction(home, parseControlAction(request.action));
      return { ok: true, value: { text, view: await controlView(home) } satisfies ControlOutcome };
    }
    throw usageError(`unknown request ${JSON.stringify(request?.op)}`, 'ask view, conversation or act');
  } catch (error) {
    return { ok: false, ...errorToJson(error), kind: isClawError(error) ? error.kind : 'io' };
  }
}

process.umask(PRIVATE_UMASK);
process.stdout.write(`${JSON.stringify(await answer())}\n`);
// A PostgreSQL pool the answer opened must not keep the process.
await closeProcessResources();
