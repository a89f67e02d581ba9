import { spawnSync } from 'node:child_process';
import { TextDecoder } from 'node:util';
import { ClawError } from '../core/errors.js';
import type { HttpResponse } from './http.js';
import { type Readable, tidy } from './readable.js';

/**
 * A response made readable: HTML becomes the main content as Markdown (Readability drops the
 * navigation, cookie banners, footers and ads; headings, lists, tables, links and code stay),
 * text, JSON and Markdown pass through, a PDF becomes its text (Debian's pdftotext). Anything
 * else is refused, rather than handing a model bytes it cannot read.
 */

type Kind = 'html' | 'text' | 'pdf';

const TEXT_TYPES = /^(text\/|application\/([\w.+-]+\+)?(json|xml|javascript|x-ndjson|markdown)$)/;

export async function readResponse(response: HttpResponse, raw: boolean): Promise<Readable> {
  const kind = kindOf(response);
  if (kind === 'pdf') {
    if (raw) throw cannotRead(response, 'a PDF has no raw text form');
    return { title: null, byline: null, text: pdfText(response.body) };
  }
  const text = decode(response, kind === 'html');
  if (raw || kind === 'text') return { title: null, byline: null, text };
  // The article reader (a DOM, Readability, turndown) loads only for a page that needs it: most of web's start-up.
  const { htmlToMarkdown } = await import('./article.js');
  return htmlToMarkdown(text, response.url.href);
}

function kindOf({ mediaType, body }: HttpResponse): Kind {
  if (mediaType === 'text/html' || mediaType === 'application/xhtml+xml') return 'html';
  if (mediaType === 'application/pdf') return 'pdf';
  if (TEXT_TYPES.test(mediaType)) return 'text';
  if (mediaType === '' || mediaType === 'application/octet-stream') {
    // No type said: what the bytes look like.
    const head = body.subarray(0, 512).toString('latin1');
    if (head.startsWith('%PDF-')) return 'pdf';
    if (/^\s*(<!doctype html|<html)/i.test(head)) return 'html';
    if (!head.includes('\0')) return 'text';
  }
  throw cannotRead({ mediaType }, '');
}

function cannotRead({ mediaType }: Pick<HttpResponse, 'mediaType'>, why: string): ClawError {
  return new ClawError('invalid', `cannot read this type: ${mediaType || 'binary data'}${why ? ` (${why})` : ''}`, {
    suggestion: 'web fetch reads HTML, text, JSON, Markdown and PDF pages; find a page with the content as text',
  });
}

/**
 * The body as text in its charset: the header's, else (HTML) a `<meta>` one in its first bytes,
 * else a byte order mark, else UTF-8. An unknown charset name reads as UTF-8.
 */
export function decode({ body, charset }: Pick<HttpResponse, 'body' | 'charset'>, html: boolean): string {
  const label = charset ?? (html ? metaCharset(body) : undefined) ?? 'utf-8';
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(label);
  } catch {
    decoder = new TextDecoder('utf-8');
  }
  return decoder.encoding === 'windows-1252' ? decodeWindows1252(body) : decoder.decode(body);
}

/**
 * Node 20's TextDecoder reads windows-1252 (which the web means by latin1 and ascii too) as
 * ISO-8859-1, turning 0x80–0x9F (€, curly quotes, dashes) into control characters.
 */
const WINDOWS_1252_HIGH = '€\u0081‚ƒ„…†‡ˆ‰Š‹Œ\u008dŽ\u008f\u0090‘’“”•–—˜™š›œ\u009džŸ';

function decodeWindows1252(body: Buffer): string {
  let text = '';
  for (const byte of body) text += byte >= 0x80 && byte <= 0x9f ? WINDOWS_1252_HIGH[byte - 0x80] : String.fromCharCode(byte);
  return text;
}

function metaCharset(body: Buffer): string | undefined {
  const head = body.subarray(0, 4096).toString('latin1');
  return /<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)/i.exec(head)?.[1];
}

/** A PDF's text, through poppler's pdftotext (poppler-utils), with the page layout kept. */
function pdfText(body: Buffer): string {
  const result = spawnSync('pdftotext', ['-layout', '-enc', 'UTF-8', '-', '-'], { input: body, maxBuffer: 64 * 1024 * 1024, timeout: 30_000 });
  if (result.error) {
    throw new ClawError('invalid', 'cannot read this PDF: pdftotext is not installed', { suggestion: 'install poppler-utils (apt-get install poppler-utils)', cause: result.error });
  }
  if (result.status !== 0) {
    throw new ClawError('invalid', `cannot read this PDF: ${result.stderr.toString().trim().split('\n')[0] || `pdftotext exited ${result.status}`}`, {
      suggestion: 'find the content as a web page instead',
    });
  }
  return tidy(result.stdout.toString('utf8'));
}
