import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';

/**
 * The README and the pages under docs/ link into each other (the guide's chapters, the reference,
 * ARCHITECTURE.md), often to a heading: a link that leads nowhere after a section moves or is
 * renamed is a failing test. A heading's anchor is the one GitHub renders: lower case, punctuation
 * but `-` and `_` dropped, spaces as `-`; an `<a id="...">` is one too.
 */

const root = packageRoot();
const DOCUMENTS = ['README.md', ...markdownUnder('docs')];

function markdownUnder(folder: string): string[] {
  return readdirSync(join(root, folder), { withFileTypes: true }).flatMap((entry) => {
    const path = `${folder}/${entry.name}`;
    if (entry.isDirectory()) return markdownUnder(path);
    return entry.name.endsWith('.md') ? [path] : [];
  });
}

/** The text outside fenced code blocks, where a link or a heading means one. */
function prose(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').filter((line) => {
    if (/^\s*(`{3,}|~{3,})/.test(line)) fenced = !fenced;
    else return !fenced;
    return false;
  });
}

function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\- ]/gu, '')
    .replaceAll(' ', '-');
}

function anchors(file: string): Set<string> {
  const lines = prose(readFileSync(file, 'utf8'));
  const found = new Set<string>();
  for (const line of lines) {
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (heading) found.add(headingAnchor(heading[1]!));
    for (const id of line.matchAll(/<a id="([^"]+)"/g)) found.add(id[1]!);
  }
  return found;
}

/** Every relative link of a document that leads to no file, or to no heading of it. */
function brokenLinks(document: string): string[] {
  const path = join(root, document);
  const broken: string[] = [];
  for (const line of prose(readFileSync(path, 'utf8'))) {
    for (const [, link] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(link!)) continue; // https:, mailto:
      const [target, anchor] = link!.split('#') as [string, string | undefined];
      const file = target ? join(dirname(path), target) : path;
      if (!existsSync(file)) broken.push(`${link}: no file ${relative(root, file)}`);
      else if (anchor && !(file.endsWith('.md') && anchors(file).has(anchor))) broken.push(`${link}: no heading #${anchor} in ${relative(root, file)}`);
    }
  }
  return broken;
}

describe('links between the docs', () => {
  it('makes anchors as GitHub does', () => {
    expect(headingAnchor("The system agents' reports: maintainer, warden, evolver")).toBe('the-system-agents-reports-maintainer-warden-evolver');
    expect(headingAnchor('`agent` — the agent runtime')).toBe('agent--the-agent-runtime');
  });

  it.each(DOCUMENTS)('%s links only to files and headings that exist', (document) => {
    expect(brokenLinks(document)).toEqual([]);
  });
});
