import { parseHTML } from 'linkedom';
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
});
