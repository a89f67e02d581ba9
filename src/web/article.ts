import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';
import { toMarkdown } from '../core/html-markdown.js';
import { tidy, type Readable } from './readable.js';

/**
 * An HTML page's main content as Markdown: Readability drops the navigation, cookie banners,
 * footers and ads; turndown keeps headings, lists, tables, links and code. The heavy part of
 * `web fetch`, in a chunk of its own that only an HTML page loads.
 */
export function htmlToMarkdown(html: string, url: string): Readable {
  const { document } = parseHTML(html);
  // Readability resolves relative links against the document's base; a parsed string has none.
  if (!document.querySelector('base[href]')) {
    const base = document.createElement('base');
    base.setAttribute('href', url);
    document.head?.prepend(base);
  }
  const title = document.title?.trim() || null;
  // The article as the element itself: serialising it to HTML only to parse it again cost as much as reading it.
  const reader = new Readability<unknown>(document as never, { serializer: (node) => node });
  speedUp(reader as unknown as ReadabilityInternals);
  const article = reader.parse();
  if (article?.content && article.textContent?.trim()) {
    return { title: article.title?.trim() || title, byline: article.byline?.trim() || null, text: tidy(toMarkdown(unclonable(article.content))) };
  }
  // Too little for Readability (a short page, an app shell): the body without the obvious chrome.
  const { document: whole } = parseHTML(html);
  for (const chrome of whole.querySelectorAll('nav, header, footer, aside, [role=navigation], [role=banner], [role=contentinfo]')) chrome.remove();
  return { title, byline: null, text: tidy(toMarkdown(unclonable(whole.body ?? whole.documentElement))) };
}

/**
 * The element as turndown's input without the deep copy turndown makes of it (so as to leave its
 * caller's DOM as it was): these documents are this module's own, read once, and the copy was a
 * tenth of a warm read of the bench's 200 KB article, counting the collector's share.
 */
function unclonable(element: unknown): never {
  (element as { cloneNode: () => unknown }).cloneNode = () => element;
  return element as never;
}

interface Element {
  getElementsByTagName(name: string): ArrayLike<Element>;
  getAttribute(name: string): string | null;
}

/** What Readability (0.6, pinned) does internally that is changed here. */
interface ReadabilityInternals {
  REGEXPS: { byline: RegExp };
  _getAllNodesWithTag(node: Element, tagNames: string[]): Element[];
  _isValidByline(node: Element, matchString: string): boolean;
}

/**
 * Two of Readability's steps, made cheap on linkedom without changing what they find:
 * - it asks for elements by tag with `querySelectorAll("img,embed,...")`, which linkedom compiles
 *   as a CSS selector at each call: once per paragraph as it cleans the article, 40% of its time
 *   on the bench's long one. It gets what Readability takes on a DOM without querySelectorAll:
 *   each tag's elements, from linkedom's walk of the tree.
 * - it reads an element's whole text before the cheap tests of whether it may be the byline, for
 *   each element until it finds one: the page's text again for each ancestor of the content, on a
 *   page without a byline for every element. The cheap tests (its own) come first.
 */
function speedUp(reader: ReadabilityInternals): void {
  reader._getAllNodesWithTag = (node, tagNames) => tagNames.flatMap((tag) => Array.from(node.getElementsByTagName(tag)));
  const isValidByline = reader._isValidByline;
  reader._isValidByline = function (node, matchString) {
    const mayBe = node.getAttribute('rel') === 'author' || node.getAttribute('itemprop')?.includes('author') || this.REGEXPS.byline.test(matchString);
    return mayBe && isValidByline.call(this, node, matchString);
  };
}
