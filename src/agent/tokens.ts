/** A rough token estimate (4 characters a token), enough to decide when to compact and what fits. */
export const CHARS_PER_TOKEN = 4;

export function estimateTokens(...texts: string[]): number {
  return Math.ceil(texts.reduce((sum, text) => sum + text.length, 0) / CHARS_PER_TOKEN);
}
