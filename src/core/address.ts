import { usageError } from './errors.js';

/**
 * Source addresses (DESIGN §7). Every segment is percent-encoded, so a `:` (or `/`, `%`, NUL)
 * inside an id can never shift the segments or reach a path:
 *
 * - `external:<channel_type>:<instance>:<conversation_type>:<conversation_id>:<peer_id>`
 * - `internal:<conversation_type>:<conversation_id>:<agent_id>`
 * - `self`
 */
export type SourceAddress = ExternalAddress | InternalAddress | SelfAddress;

export interface ExternalAddress {
  kind: 'external';
  channelType: string;
  instance: string;
  conversationType: string;
  conversationId: string;
  peerId: string;
}

export interface InternalAddress {
  kind: 'internal';
  conversationType: string;
  conversationId: string;
  agentId: string;
}

export interface SelfAddress {
  kind: 'self';
}

/**
 * A terminal chat is each host's own (its owner at that machine): its gateway never claims it and
 * its replies go out on the agent's host, where the owner chats.
 */
export const isHostsOwnChannel = (channelType: string): boolean => channelType === 'terminal';

// Only RFC 3986 unreserved characters stay literal, so every string has exactly one encoding.
const UNRESERVED = /^[A-Za-z0-9._~-]$/;
const ENCODED_SEGMENT = /^(?:[A-Za-z0-9._~-]|%[0-9A-F]{2})+$/;

/** Percent-encodes one segment. Throws a usage error for an empty or malformed string. */
export function encodeSegment(value: string): string {
  if (value === '') throw usageError('an address segment is empty', 'give every id at least one character');
  if (!value.isWellFormed()) {
    throw usageError('an address segment holds a lone UTF-16 surrogate', 'pass ids as valid Unicode text');
  }
  let out = '';
  for (const char of value) {
    if (UNRESERVED.test(char)) out += char;
    else for (const byte of Buffer.from(char, 'utf8')) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

export function decodeSegment(segment: string): string {
  if (!ENCODED_SEGMENT.test(segment)) {
    throw usageError(`malformed address segment ${JSON.stringify(segment)}`, 'percent-encode ids with encodeSegment');
  }
  const decoded = Buffer.from(
    segment.replace(/%([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
    'latin1',
  ).toString('utf8');
  // Reject encodings that are not the canonical one (invalid UTF-8, needlessly encoded
  // characters): one id, one address, so addresses can be compared as strings.
  if (encodeSegment(decoded) !== segment) {
    throw usageError(`non-canonical address segment ${JSON.stringify(segment)}`, 'percent-encode ids with encodeSegment');
  }
  return decoded;
}

export function formatAddress(address: SourceAddress): string {
  switch (address.kind) {
    case 'self':
      return 'self';
    case 'external':
      return ['external', address.channelType, address.instance, address.conversationType, address.conversationId, address.peerId].map((part, i) => (i === 0 ? part : encodeSegment(part))).join(':');
    case 'internal':
      return ['internal', address.conversationType, address.conversationId, address.agentId].map((part, i) => (i === 0 ? part : encodeSegment(part))).join(':');
    default: {
      const never: never = address;
      throw new Error(`unknown address ${JSON.stringify(never)}`);
    }
  }
}

export function parseAddress(text: string): SourceAddress {
  if (text === 'self') return { kind: 'self' };
  const [kind, ...rest] = text.split(':');
  const segments = () => rest.map(decodeSegment);
  if (kind === 'external' && rest.length === 5) {
    const [channelType, instance, conversationType, conversationId, peerId] = segments() as [string, string, string, string, string];
    return { kind, channelType, instance, conversationType, conversationId, peerId };
  }
  if (kind === 'internal' && rest.length === 3) {
    const [conversationType, conversationId, agentId] = segments() as [string, string, string];
    return { kind, conversationType, conversationId, agentId };
  }
  throw usageError(
    `invalid source address ${JSON.stringify(text)}`,
    "use 'self', 'external:<channel_type>:<instance>:<conversation_type>:<conversation_id>:<peer_id>' or 'internal:<conversation_type>:<conversation_id>:<agent_id>'",
  );
}
