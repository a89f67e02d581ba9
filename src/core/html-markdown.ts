import TurndownService from 'turndown/lib/turndown.browser.cjs.js';

/**
 * A DOM (linkedom's) as Markdown, by turndown: ATX headings, fenced code, `*` lists, GitHub
 * tables. One converter for web fetch's pages (src/web/article.ts) and the email channel's HTML
 * mail (src/xgw/channels/email-text.ts), so here in core, below both. The browser build of
 * turndown: it is only ever given elements, so the Node build's own HTML parser (domino, loaded
 * with it) would be start-up time for nothing.
 *
 * turndown over node-html-markdown: the latter looks at the end of its whole output after each
 * node, which copies the output each time (V8 flattens the concatenated string), quadratic in the
 * page: 10 s for the bench's 200 KB article on a loaded machine, against 0.1 s here.
 */

const CHROME = ['script', 'style', 'noscript', 'iframe', 'svg', 'form', 'button'] as const;

/**
 * Where turndown's escape of line-start syntax (`-`, `+ `, `=`, `# `, `~~~`, `>`, `1. `) would put
 * its backslash. turndown escapes it at the start of every text node, but most text nodes start
 * mid-line (`<b>10</b>. Doors` is not a list item); only the whole output shows which are at a
 * line start. A NUL, which no page's text keeps here (the escape drops it).
 */
const LINE_START_MARK = '\0';
/** A line's start: indentation, block quote markers, list markers, then the mark (after an ordered item's number). */
const MARK_AT_LINE_START = /^([ \t>]*(?:(?:[*+-]|\d+[.)])[ \t]+)*\d*)\0/gm;

let service: TurndownService | undefined;

/** `root`: an element of linkedom's DOM (the DOM types are not in this Node project's lib). */
export function toMarkdown(root: TurndownService.Node): string {
  service ??= createService();
  return service.turndown(root).replace(MARK_AT_LINE_START, '$1\\').replaceAll(LINE_START_MARK, '');
}

function createService(): TurndownService {
  const turndown = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '*', hr: '---' });
  turndown.remove([...CHROME]);
  // turndown's own escapes, its line-start one as a mark; the characters it escapes inline (\\ * ` [ ] _) never start those.
  const escapeMarkdown = turndown.escape.bind(turndown);
  turndown.escape = (text) => escapeMarkdown(text.replaceAll(LINE_START_MARK, '')).replace(/^(\d*)\\(?=[-+=#~>.])/, `$1${LINE_START_MARK}`);
  // One space after the marker (turndown writes three): the same list, fewer tokens.
  turndown.addRule('listItem', {
    filter: 'li',
    replacement(content, node) {
      const parent = node.parentNode;
      let prefix = '* ';
      if (parent?.nodeName === 'OL') {
        const start = Number(parent.getAttribute('start') ?? 1);
        prefix = `${(Number.isFinite(start) ? start : 1) + Array.prototype.indexOf.call(parent.children, node)}. `;
      }
      const body = content.replace(/^\n+/, '').replace(/\n+$/, /\n$/.test(content) ? '\n' : '');
      return `${prefix}${body.replace(/\n/g, `\n${' '.repeat(prefix.length)}`)}${node.nextSibling ? '\n' : ''}`;
    },
  });
  // Tables as GitHub's pipe tables, the first row as the header; a cell is one line.
  turndown.addRule('tableCell', {
    filter: ['th', 'td'],
    replacement: (content) =>
      ` ${content
        .replace(/\s*\n\s*/g, ' ')
        .replace(/\|/g, '\\|')
        .trim()} |`,
  });
  turndown.addRule('tableRow', {
    filter: 'tr',
    replacement(content, node) {
      const row = `|${content}\n`;
      const table = node.closest('table');
      if (table?.querySelector('tr') !== node) return row;
      const cells = Array.prototype.filter.call(node.childNodes, (cell: { nodeName: string }) => cell.nodeName === 'TH' || cell.nodeName === 'TD').length;
      return `${row}|${' --- |'.repeat(Math.max(cells, 1))}\n`;
    },
  });
  turndown.addRule('tableSection', { filter: ['thead', 'tbody', 'tfoot'], replacement: (content) => content });
  turndown.addRule('table', { filter: 'table', replacement: (content) => `\n\n${content.replace(/^\n+|\n+$/g, '')}\n\n` });
  return turndown;
}
