import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { articleHtml } from '../testing/fixture-site.js';
import { htmlToMarkdown } from './article.js';

// The built reader has its libraries patched where they work for nothing (tsup.config.ts
// READER_PATCHES); this file runs them unpatched, from node_modules, to compare.
let bundled: typeof htmlToMarkdown;

beforeAll(async () => {
  const dist = join(packageRoot(), 'dist');
  const chunk = readdirSync(dist).find((name) => /^article-\w+\.js$/.test(name));
  if (!chunk) throw new Error('no dist/article-*.js - build first (npx tsup)');
  ({ htmlToMarkdown: bundled } = (await import(join(dist, chunk))) as { htmlToMarkdown: typeof htmlToMarkdown });
});

const URL = 'https://example.test/page';

describe('the built article reader', () => {
  it('reads the fixture articles as the unpatched libraries do', () => {
    for (const html of [articleHtml(), articleHtml(300)]) expect(bundled(html, URL)).toEqual(htmlToMarkdown(html, URL));
  });

  it('tells blank elements (white space, comments, nothing) from others as the unpatched turndown does', () => {
    const blankish = fc.constantFrom('', ' ', '\n\t ', '<!-- note -->', '&nbsp;', ' x ', '<br>', '<img src="/i.png">', '<td></td>', '<a href="/a"> </a>');
    const tag = fc.constantFrom('p', 'div', 'span', 'b', 'em', 'a', 'li', 'code', 'section', 'blockquote');
    const tree: fc.Arbitrary<string> = fc.letrec<{ node: string }>((own) => ({
      node: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        blankish,
        fc.tuple(tag, fc.array(own('node'), { maxLength: 4 })).map(([name, children]) => `<${name}>${children.join('')}</${name}>`),
      ),
    })).node;
    fc.assert(
      fc.property(fc.array(tree, { minLength: 1, maxLength: 5 }), (parts) => {
        const html = `<html><head><title>t</title></head><body><article><h1>Title</h1>${parts.join('\n')}<p>${'Words of the article. '.repeat(30)}</p></article></body></html>`;
        expect(bundled(html, URL)).toEqual(htmlToMarkdown(html, URL));
      }),
      { numRuns: 150 },
    );
  });
});
