/** What `web fetch` makes of a page, whichever reader made it (reader.ts, and article.ts for HTML). */
export interface Readable {
  title: string | null;
  byline: string | null;
  text: string;
}

/** Text without runs of blank lines or blank ends. */
export function tidy(text: string): string {
  return text.replace(/\n{3,}/g, '\n\n').trim();
}
