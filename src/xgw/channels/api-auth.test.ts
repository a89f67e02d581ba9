import { createHmac } from 'node:crypto';
import * as fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, expectClawError, type TestHome } from '../../testing/index.js';
import { hasHookSecret } from './api-hooks.js';
import { addApiClient, clientOfToken, listApiClients, revokeApiClient } from './api-tokens.js';

// Who may call the API: a client's bearer token, a hook's secret or signature.

describe('api tokens', () => {
  let t: TestHome;
  beforeEach(() => {
    t = createTestHome();
  });
  afterEach(() => t.cleanup());

  it('finds the client of each token and no client for any other string', () => {
    const a = addApiClient(t.home, 'a');
    const b = addApiClient(t.home, 'b');
    const clients = listApiClients(t.home);
    expect(clientOfToken(clients, a)).toBe('a');
    expect(clientOfToken(clients, b)).toBe('b');
    fc.assert(fc.property(fc.string(), (other) => other === a || other === b || clientOfToken(clients, other) === undefined));
    expect(revokeApiClient(t.home, 'a')).toBe(true);
    expect(clientOfToken(listApiClients(t.home), a)).toBeUndefined();
    expect(revokeApiClient(t.home, 'a')).toBe(false);
  });

  it('refuses a name that is not one, and a name in use', () => {
    expectClawError(() => addApiClient(t.home, 'Not A Name'), 'usage');
    addApiClient(t.home, 'ci');
    expectClawError(() => addApiClient(t.home, 'ci'), 'conflict');
  });
});

describe('hasHookSecret', () => {
  const body = Buffer.from('{"build":1}');
  const sign = (secret: string, data: Buffer) => createHmac('sha256', secret).update(data).digest('hex');

  it('takes the secret itself or the HMAC-SHA256 of the body, with or without sha256=', () => {
    expect(hasHookSecret('s3cret', { 'x-hook-secret': 's3cret' }, body)).toBe(true);
    expect(hasHookSecret('s3cret', { 'x-hook-signature': sign('s3cret', body) }, body)).toBe(true);
    expect(hasHookSecret('s3cret', { 'x-hook-signature': `sha256=${sign('s3cret', body)}` }, body)).toBe(true);
  });

  it('refuses any other secret, a signature of another body or key, and every call when no secret is set', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), (secret, other) => {
        fc.pre(secret !== other);
        expect(hasHookSecret(secret, { 'x-hook-secret': other }, body)).toBe(false);
        expect(hasHookSecret(secret, { 'x-hook-signature': sign(other, body) }, body)).toBe(false);
      }),
    );
    expect(hasHookSecret('s3cret', { 'x-hook-signature': sign('s3cret', Buffer.from('other')) }, body)).toBe(false);
    expect(hasHookSecret('s3cret', { 'x-hook-signature': 'zz' }, body)).toBe(false);
    expect(hasHookSecret('s3cret', {}, body)).toBe(false);
    expect(hasHookSecret(undefined, { 'x-hook-secret': '' }, body)).toBe(false);
    expect(hasHookSecret('', { 'x-hook-secret': '' }, body)).toBe(false);
  });
});
