import { createHash } from 'node:crypto';

const SAFE = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;
/** The suffix `slug` appends; a name that already ends like this is slugged too. */
const HASHED = /--[0-9a-f]{10}$/;
const HASH_LENGTH = 10;

/**
 * Turns any id into a file or directory name: no `/`, no leading `.` (so no `..`), no NUL, at
 * most `maxLength` characters. A name that is already safe stays as it is; any other gets
 * `--<hash of the original>` appended, which makes slugs collision-free: unchanged names never
 * end in such a suffix, changed ones always do, and the hash tells changed ones apart.
 */
export function slug(name: string, maxLength = 64): string {
  if (name.length <= maxLength && SAFE.test(name) && !HASHED.test(name)) return name;
  // UTF-16 code units, not UTF-8: UTF-8 turns every lone surrogate into U+FFFD, so '\uD800',
  // '\uD801' and '\uFFFD' would hash alike and share a slug.
  const hash = createHash('sha256').update(name, 'utf16le').digest('hex').slice(0, HASH_LENGTH);
  const readable = name
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^\.+/, '_')
    .slice(0, Math.max(0, maxLength - HASH_LENGTH - 2));
  return `${readable}--${hash}`;
}

/**
 * Whether `slug` could have made this name: for names read back from elsewhere (a thread id in a
 * message), which must name a directory of their own and nothing outside it. Hashed slugs pass
 * too: their hash cannot be checked without the original, and needs not be.
 */
export function isSlug(name: string, maxLength = 64): boolean {
  return name.length <= maxLength && SAFE.test(name);
}

const ID = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** Ids a user chooses (agent ids, timer ids): lower-case, digits, `_` and `-`, at most 63. */
export function isValidId(id: string): boolean {
  return ID.test(id);
}
