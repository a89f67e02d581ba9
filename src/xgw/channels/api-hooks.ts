import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * Whether a webhook call carries its hook's secret: the secret itself in `X-Hook-Secret`, or the
 * HMAC-SHA256 of the body under the secret in `X-Hook-Signature` (hex, optionally `sha256=`
 * first, as GitHub sends it). Compared in constant time; no secret set admits nothing.
 */
export function hasHookSecret(secret: string | undefined, headers: IncomingHttpHeaders, body: Buffer): boolean {
  if (!secret) return false;
  const plain = header(headers, 'x-hook-secret');
  if (plain !== undefined) return sameDigest(sha256(Buffer.from(plain)), sha256(Buffer.from(secret)));
  const signature = header(headers, 'x-hook-signature')?.replace(/^sha256=/i, '');
  if (signature === undefined || !/^[0-9a-f]{64}$/i.test(signature)) return false;
  return sameDigest(Buffer.from(signature, 'hex'), createHmac('sha256', secret).update(body).digest());
}

/** The text an agent gets for a webhook call: which hook, and the body (JSON pretty-printed). */
export function hookText(name: string, contentType: string | undefined, body: Buffer): string {
  const text = body.toString('utf8');
  if (contentType?.startsWith('application/json')) {
    try {
      return `Webhook ${name} (JSON):\n${JSON.stringify(JSON.parse(text), null, 2)}`;
    } catch {
      // Not JSON after all: passed on as the text it is.
    }
  }
  return `Webhook ${name}:\n${text}`;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

// Digests of equal length, so that timingSafeEqual neither throws nor leaks the secret's length.
function sha256(data: Buffer): Buffer {
  return createHash('sha256').update(data).digest();
}

function sameDigest(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
