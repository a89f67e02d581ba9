import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, type TestHome } from '../testing/index.js';
import { ClawError, formatError } from './errors.js';
import { listenSocket, request } from './ipc.js';

let t: TestHome;
let close: (() => void) | undefined;

beforeEach(() => {
  t = createTestHome();
});

afterEach(() => {
  close?.();
  close = undefined;
  t.cleanup();
});

async function serve(handle: (message: unknown) => unknown): Promise<string> {
  const path = join(t.home, 'run', 'test.sock');
  const server = await listenSocket(path, handle);
  close = () => server.close();
  return path;
}

describe('control socket errors', () => {
  it('relays a ClawError with its kind and suggestion', async () => {
    const path = await serve(() => {
      throw new ClawError('conflict', 'held by someone', { suggestion: 'wait for it' });
    });
    const error = await request(path, { op: 'x' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ClawError);
    expect(error).toMatchObject({ kind: 'conflict', message: 'held by someone', suggestion: 'wait for it' });
  });

  it('relays an unexpected error in the `Error: what - how to fix` form', async () => {
    const path = await serve(() => {
      throw new TypeError('cannot read properties of undefined');
    });
    const error = await request(path, { op: 'x' }).catch((caught: unknown) => caught);
    expect(formatError(error)).toBe('Error: cannot read properties of undefined - this is unexpected; see the log and report it if it persists');
  });
});
