/**
 * Splits a message that is longer than a platform allows (Telegram: 4,096 UTF-16 code units)
 * into chunks of at most `limit` code units. Each cut is made at the last newline in the window,
 * else at the last space, else at the limit itself; a newline or space cut at is dropped, so the
 * chunks joined with the separators they were cut at give back the text (a separator right after
 * the last full window is dropped too, rather than sent alone). A hard cut never falls inside a
 * surrogate pair, and no chunk is empty (an empty text gives no chunks).
 *
 * `limit` counts code units, as `String.length` and Telegram do, and must be at least 2 so that
 * every character (an astral one is two units) fits in a chunk.
 */
export function splitText(text: string, limit: number): string[] {
  if (!Number.isInteger(limit) || limit < 2) throw new RangeError(`splitText: limit must be an integer of at least 2, got ${limit}`);
  const chunks: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    // A separator right after a full window (index `limit`) is a perfect cut too.
    const at = lastSeparator(rest, '\n', limit) ?? lastSeparator(rest, ' ', limit);
    if (at !== undefined) {
      chunks.push(rest.slice(0, at));
      rest = rest.slice(at + 1);
    } else {
      const cut = isHighSurrogate(rest.charCodeAt(limit - 1)) && isLowSurrogate(rest.charCodeAt(limit)) ? limit - 1 : limit;
      chunks.push(rest.slice(0, cut));
      rest = rest.slice(cut);
    }
  }
  if (rest.length > 0) chunks.push(rest);
  return chunks;
}

/** The last index ≤ `limit` of `separator` that leaves a non-empty chunk before it. */
function lastSeparator(text: string, separator: string, limit: number): number | undefined {
  const at = text.lastIndexOf(separator, limit);
  return at > 0 ? at : undefined;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
