import * as z from 'zod/mini';
import type { SourceAddress } from '../core/address.js';

/**
 * One person on several channels (config `identities`, `agent identity link`): the owner names a
 * person and the addresses they write from, `<channel type>:<instance>:<peer id>` as in
 * `policy.owners`. Linked addresses share the person's memory file (user-person.<name>.md) and
 * are the owner together (tool-policy.ts isOwner); their direct chats stay separate threads unless
 * `routing.dm_scope` is `person` (router.ts). Nothing is linked but what the owner wrote: two
 * addresses with the same name or number on two platforms are two people until then.
 */

/** A person's name: lower-case letters, digits, `_` and single `-`; it names their memory file. */
export const PERSON_NAME = /^[a-z0-9]+(?:[_-][a-z0-9]+)*$/;

export function isPersonName(name: string): boolean {
  return name.length <= 32 && PERSON_NAME.test(name);
}

/** `<channel type>:<instance>:<peer id>`, e.g. telegram:main:123456 (the peer id may hold `:`). */
export const PERSON_ADDRESS = /^[a-z]+:[a-z0-9][a-z0-9_-]{0,31}:.+$/;

export const ADDRESS_HINT = 'write <channel type>:<instance>:<peer id>, e.g. telegram:main:123456 or webchat:main:<peer>';

/** A name and the addresses linked to it. */
export type Identities = Record<string, string[]>;

export const IdentitiesSchema = z._default(
  z
    .record(
      z.string().check(z.refine(isPersonName, 'a person is named with lower-case letters, digits, _ and -, e.g. alice')),
      z.array(z.string().check(z.regex(PERSON_ADDRESS, ADDRESS_HINT))).check(z.minLength(1, 'a person has at least one address')),
    )
    .check(z.refine((identities: Identities) => sharedAddress(identities) === undefined, 'an address belongs to one person only: unlink it from the other first')),
  {},
);

/** How people's direct chats share threads under per-peer routing: one per address (`peer`), or one per linked person (`person`). */
export const DM_SCOPES = ['peer', 'person'] as const;
export type DmScope = (typeof DM_SCOPES)[number];

/** An external sender's address as identities and `policy.owners` write it; null for an agent or `self`. */
export function personAddress(address: SourceAddress): string | null {
  return address.kind === 'external' ? `${address.channelType}:${address.instance}:${address.peerId}` : null;
}

/** The person an address is linked to, if any. */
export function personOf(identities: Identities, address: SourceAddress | string): string | null {
  const written = typeof address === 'string' ? address : personAddress(address);
  if (written === null) return null;
  return Object.entries(identities).find(([, addresses]) => addresses.includes(written))?.[0] ?? null;
}

/** The key of a linked person's memory (user-<key>.md): no address's key has one dot only (router.ts). */
export function personKey(name: string): string {
  return `person.${name}`;
}

/** The addresses linked to one of `owners`: the same person, so the owner too. */
export function linkedOwners(identities: Identities, owners: readonly string[]): string[] {
  return Object.values(identities).flatMap((addresses) => (addresses.some((address) => owners.includes(address)) ? addresses : []));
}

/** An address two people are linked to, if there is one. */
export function sharedAddress(identities: Identities): string | undefined {
  const seen = new Set<string>();
  for (const address of Object.values(identities).flat()) {
    if (seen.has(address)) return address;
    seen.add(address);
  }
  return undefined;
}
