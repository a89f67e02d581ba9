import fc from 'fast-check';
import { parseHTML } from 'linkedom';
import TurndownService from 'turndown/lib/turndown.browser.cjs.js';
import { describe, expect, it } from 'vitest';
import { toMarkdown } from './html-markdown.js';

const markdownOf = (html: string) => toMarkdown(parseHTML(`<html><body>${html}</body></html>`).document.body as never).trim();

describe('toMarkdown', () => {
  it('writes a table as a pipe table whose first row is the header, a cell on one line with its pipes escaped', () => {
    expect(markdownOf('<table><tr><th>Day</th><th>Note</th></tr><tr><td>Monday</td><td>a | b<br>c</td></tr></table>')).toBe('| Day | Note |\n| --- | --- |\n| Monday | a \\| b c |');
  });

  it('writes lists with one space after the marker, an ordered one from its start', () => {
    expect(markdownOf('<ul><li>Adult</li><li>Child</li></ul>')).toBe('* Adult\n* Child');
    expect(markdownOf('<ol start="3"><li>three</li><li>four</li></ol>')).toBe('3. three\n4. four');
  });

  it('keeps headings, links and code blocks, and drops scripts, styles, forms and buttons', () => {
    const text = markdownOf(
      '<h2>Fares</h2><p>See <a href="https://x.test/f">the list</a>.</p><pre><code>a &lt; b</code></pre><script>evil()</script><style>p{}</style><form><input></form><button>OK</button>',
    );
    expect(text).toBe('## Fares\n\nSee [the list](https://x.test/f).\n\n```\na < b\n```');
  });

  it('escapes list, heading and quote syntax only where a line starts, not where a text node starts mid-line', () => {
    expect(markdownOf('<p>Doors open at <b>9</b>:30, last entry <b>10</b>:00. Lunch <b>12</b>-13. Room <i>B</i>1. on the left.</p>')).toBe(
      'Doors open at **9**:30, last entry **10**:00. Lunch **12**-13. Room _B_1. on the left.',
    );
    expect(markdownOf('<p>1. not a list</p><p>- not an item</p><p># not a heading</p><p>a<br>=== not a heading underline</p>')).toBe(
      '1\\. not a list\n\n\\- not an item\n\n\\# not a heading\n\na  \n\\=== not a heading underline',
    );
    expect(markdownOf('<ul><li>- a dash</li></ul><blockquote><p>&gt; a quote sign</p></blockquote>')).toBe('* \\- a dash\n\n> \\> a quote sign');
  });

  // Text of the characters that mean something at a line start, a word at a time.
  const word = fc.stringMatching(/^[0-9a-z:.#>=+~-]{1,8}$/);
  const stock = new TurndownService();

  it('leaves any text that is not at a line start as it is', () => {
    fc.assert(
      fc.property(fc.array(word, { minLength: 1, maxLength: 5 }), (words) => {
        const text = words.join(' ');
        expect(markdownOf(`<p>x <b>y</b>${text}</p>`)).toBe(`x **y**${text}`);
      }),
    );
  });

  it("escapes text at a line start as turndown's own escape does", () => {
    fc.assert(
      fc.property(fc.array(word, { minLength: 1, maxLength: 5 }), (words) => {
        const text = words.join(' ');
        expect(markdownOf(`<p>${text}</p>`)).toBe(stock.escape(text));
      }),
    );
  });
});
