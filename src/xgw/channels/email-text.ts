import { parseHTML } from 'linkedom';
import { toMarkdown } from '../../core/html-markdown.js';

/**
 * What a person wrote in a mail, without what their client added: the quoted history of the
 * thread (the agent has it already) and the signature. HTML mail becomes Markdown through the
 * converter web fetch uses; the quotes are taken out of the DOM first, where clients mark them.
 * Only what comes after the last line the person wrote is cut: an answer written between quoted
 * lines keeps them, since the quotes say what it answers.
 */

/** Where clients put the quoted history and the signature in HTML mail. */
const HTML_QUOTES = [
  'blockquote[type=cite]', // Apple Mail, Thunderbird
  '.gmail_quote', // Gmail, with its "On … wrote:" line
  '.gmail_signature',
  '.moz-cite-prefix', // Thunderbird's "On … wrote:"
  '.moz-signature',
  '#appendonsend', // Outlook: it and all after it
  '#divRplyFwdMsg',
  'div[id^="Signature"]',
].join(', ');

/** The Markdown of an HTML mail's body, its quoted history and signature left out. */
export function htmlMailToMarkdown(html: string): string {
  const { document } = parseHTML(html.includes('<html') ? html : `<html><body>${html}</body></html>`);
  const body = document.body ?? document.documentElement;
  for (const quote of body.querySelectorAll(HTML_QUOTES)) {
    // Outlook's reply header starts the history: everything after it goes too.
    if (quote.id === 'appendonsend' || quote.id === 'divRplyFwdMsg') {
      while (quote.nextSibling) quote.nextSibling.remove();
    }
    quote.remove();
  }
  return trimReply(toMarkdown(body as never));
}

/** A line that introduces quoted history: "On <date>, <person> wrote:" and its translations. */
const ATTRIBUTION = /^(on\b.*\bwrote|am\b.*\bschrieb|le\b.*\bécrit|el\b.*\bescribió|op\b.*\bschreef)\b.*:\s*$/i;
/** A forwarded or Outlook-quoted message: all after it is history, quoted or not. */
const HISTORY_START = /^(-{2,}\s*(original message|ursprüngliche nachricht|forwarded message)\s*-{2,}|_{10,})\s*$/i;
/** The signature separator ("-- "; turndown writes it escaped), and mobile clients' footers. */
const SIGNATURE = /^(\\?-\\?-\s*|sent from my .+|get outlook for .+)$/i;
/** Longest signature cut: a "-- " line further up is text of the message. */
const MAX_SIGNATURE_LINES = 12;

/** A plain text mail (or the Markdown of an HTML one) without trailing quoted history and signature. */
export function trimReply(text: string): string {
  let lines = text.replace(/\r\n?/g, '\n').split('\n');
  const history = lines.findIndex((line) => HISTORY_START.test(line.trim()));
  if (history >= 0) lines = lines.slice(0, history);
  // Quoted lines, blank lines and attributions at the end are history.
  let end = lines.length;
  while (end > 0) {
    const line = lines[end - 1]!.trim();
    if (line === '' || line.startsWith('>') || line.startsWith('\\>') || ATTRIBUTION.test(line)) end--;
    // An attribution folded over two lines ("On Mon, Anne Example\n<anne@example.test> wrote:").
    else if (end >= 2 && ATTRIBUTION.test(`${lines[end - 2]!.trim()} ${line}`)) end -= 2;
    else break;
  }
  lines = lines.slice(0, end);
  const signature = lines.findLastIndex((line) => SIGNATURE.test(line.trim()));
  if (signature >= 0 && lines.length - signature <= MAX_SIGNATURE_LINES) lines = lines.slice(0, signature);
  return lines
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
