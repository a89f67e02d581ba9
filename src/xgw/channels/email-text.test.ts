import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { htmlMailToMarkdown, trimReply } from './email-text.js';

/** Lines a person writes: no quote marks, attributions, separators or signatures among them. */
const written = fc
  .array(fc.stringMatching(/^[A-Za-z0-9 ,.!?()'"-]{0,40}$/), { minLength: 1, maxLength: 8 })
  .map((lines) => lines.join('\n').trim())
  .filter((text) => text !== '' && text.split('\n').every((line) => !/^(-|_|on |am |le |el |op |sent from|get outlook)/i.test(line.trim())));

describe('trimReply', () => {
  it('cuts the quoted history a client appends, in every style, and leaves what the person wrote', () => {
    const histories = [
      '\n\nOn Mon, 23 Nov 2026 at 10:00, Anne <anne@example.test> wrote:\n> the old text\n> more\n>',
      '\n\nOn Mon, 23 Nov 2026 at 10:00, Anne Example\n<anne@example.test> wrote:\n\n> the old text\n',
      '\n\nAm 23.11.2026 um 10:00 schrieb Anne:\n> alt\n',
      '\n\n-----Original Message-----\nFrom: Anne\nSent: Monday\nSubject: x\n\nthe old text, unquoted\n',
      '\n\n________________________________\nFrom: Anne <anne@example.test>\nSent: Monday\n\nold\n',
      '\n\n-- \nAnne Example\nExample Ltd.\n',
      '\n\nSent from my iPhone',
    ];
    fc.assert(
      fc.property(written, fc.constantFrom(...histories), (text, history) => {
        expect(trimReply(text + history)).toBe(trimReply(text));
        expect(trimReply(text)).toBe(text.replace(/\n{3,}/g, '\n\n'));
      }),
    );
  });

  it('keeps answers written between quoted lines, with the quotes they answer', () => {
    const text = '> Where?\nThe station.\n> When?\nAt six.';
    expect(trimReply(`${text}\n\n> bye\n`)).toBe(text);
  });

  it('keeps a "--" line that is followed by more than a signature', () => {
    const text = `Steps:\n--\n${Array.from({ length: 15 }, (_, index) => `step ${index}`).join('\n')}`;
    expect(trimReply(text)).toBe(text);
  });
});

describe('htmlMailToMarkdown', () => {
  it('writes the HTML as Markdown without the quoted history and signature clients mark', () => {
    expect(
      htmlMailToMarkdown(
        '<div dir="ltr"><p>See <b>this</b>:</p><ul><li>a</li><li>b</li></ul><div class="gmail_signature">Anne | Example Ltd.</div></div><br><div class="gmail_quote"><div class="gmail_attr">On Mon, Bob wrote:</div><blockquote class="gmail_quote">old</blockquote></div>',
      ),
    ).toBe('See **this**:\n\n* a\n* b');
    expect(htmlMailToMarkdown('<html><body><p>Yes.</p><div class="moz-cite-prefix">On 23.11.26 Bob wrote:</div><blockquote type="cite">old</blockquote></body></html>')).toBe('Yes.');
    expect(htmlMailToMarkdown('<p>Fine.</p><div id="appendonsend"></div><hr><b>From:</b> Bob<br><p>old</p>')).toBe('Fine.');
  });
});
