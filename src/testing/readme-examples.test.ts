import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { extractExamples } from './readme-examples.js';

const doc = (...lines: string[]) => lines.join('\n');

describe('extractExamples', () => {
  it('takes the commands of sh, bash and shell blocks and the text of yaml blocks, each with its line and the heading above it', () => {
    const blocks = extractExamples(
      doc(
        '# Title',
        '## Quick start',
        '',
        '```sh',
        'theclaw up        # prints the URL',
        '',
        '# a comment line',
        'theclaw down',
        '```',
        '```yaml',
        'a: 1',
        'b: 2',
        '```',
        '### `pai` — the client',
        '```bash',
        'pai chat "hi"',
        '```',
        '```',
        'not a shell block',
        '```',
      ),
    );
    expect(blocks).toEqual([
      {
        section: 'Quick start',
        line: 4,
        language: 'shell',
        commands: [
          { line: 5, text: 'theclaw up        # prints the URL' },
          { line: 8, text: 'theclaw down' },
        ],
      },
      { section: 'Quick start', line: 10, language: 'yaml', commands: [{ line: 11, text: 'a: 1\nb: 2' }] },
      { section: '`pai` — the client', line: 15, language: 'shell', commands: [{ line: 16, text: 'pai chat "hi"' }] },
    ]);
  });

  it('joins a line ending in a backslash with the next, and ignores what looks like a heading inside a block', () => {
    const [block] = extractExamples(doc('## S', '```sh', 'thread push \\', '  --thread ./t', '# not a heading', 'thread info', '```'));
    expect(block!.section).toBe('S');
    expect(block!.commands).toEqual([
      { line: 3, text: 'thread push \\\n  --thread ./t' },
      { line: 6, text: 'thread info' },
    ]);
  });

  it('reads a block indented in a list item, and a longer fence that holds a shorter one', () => {
    const blocks = extractExamples(doc('- item:', '', '  ```sh', '  agent init helper', '  ```', '````sh', 'echo "```"', '```', '````'));
    expect(blocks.map((block) => block.commands)).toEqual([
      [{ line: 4, text: 'agent init helper' }],
      [
        { line: 7, text: 'echo "```"' },
        { line: 8, text: '```' },
      ],
    ]);
  });

  it('marks a whole block not run, or only the commands a marker names', () => {
    const blocks = extractExamples(
      doc(
        '<!-- example: not run (installs packages) -->',
        '```sh',
        'npm install',
        '```',
        '<!-- example: not run `xgw pair approve`, `xgw peer revoke` (needs a code a stranger got) -->',
        '',
        '```sh',
        'xgw pair list',
        'xgw pair approve K7M2QX9P',
        'xgw peer revoke telegram:main 1',
        '```',
      ),
    );
    expect(blocks[0]!.commands).toEqual([{ line: 3, text: 'npm install', notRun: 'installs packages' }]);
    expect(blocks[1]!.commands).toEqual([
      { line: 8, text: 'xgw pair list' },
      { line: 9, text: 'xgw pair approve K7M2QX9P', notRun: 'needs a code a stranger got' },
      { line: 10, text: 'xgw peer revoke telegram:main 1', notRun: 'needs a code a stranger got' },
    ]);
  });

  it('refuses a marker it cannot read, one not followed by a shell block, and one naming no command', () => {
    expect(() => extractExamples(doc('<!-- example: skip -->', '```sh', 'ls', '```'))).toThrow(/line 1: unreadable example marker/);
    expect(() => extractExamples(doc('<!-- example: not run (why) -->', 'text', '```sh', 'ls', '```'))).toThrow(/line 1: .*just before a sh/);
    expect(() => extractExamples(doc('<!-- example: not run (why) -->', '```json', '{}', '```'))).toThrow(/line 1: .*followed by a json block/);
    expect(() => extractExamples(doc('<!-- example: not run (why) -->'))).toThrow(/line 1/);
    expect(() => extractExamples(doc('<!-- example: not run `pai` (why) -->', '```sh', 'ls', '```'))).toThrow(/names `pai`, which no command/);
  });

  it('leaves other HTML comments alone', () => {
    expect(extractExamples(doc('<!-- Generated: edit the help -->', '```sh', 'ls', '```'))[0]!.commands).toEqual([{ line: 3, text: 'ls' }]);
  });

  it('finds every command of any document built from headings, prose, shell and other blocks, at its line and under its heading', () => {
    const word = fc.stringMatching(/^[a-z][a-z0-9]{0,7}$/);
    const commandText = fc.array(fc.oneof(word, fc.constantFrom('--flag', '"quoted text"', "'x'", '|', '2>err')), { minLength: 1, maxLength: 5 }).map((parts) => parts.join(' '));
    const piece = fc.oneof(
      fc.record({ kind: fc.constant('heading' as const), level: fc.integer({ min: 1, max: 6 }), text: commandText }),
      fc.record({ kind: fc.constant('prose' as const), text: commandText }),
      fc.record({ kind: fc.constant('other' as const), language: fc.constantFrom('', 'json', 'text'), lines: fc.array(commandText, { maxLength: 3 }) }),
      fc.record({ kind: fc.constant('yaml' as const), language: fc.constant('yaml'), lines: fc.array(commandText, { maxLength: 3 }) }),
      fc.record({
        kind: fc.constant('shell' as const),
        language: fc.constantFrom('sh', 'bash', 'shell'),
        lines: fc.array(fc.oneof(commandText, fc.constantFrom('', '# comment')), { maxLength: 4 }),
      }),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const lines: string[] = [];
        const expected: { section: string; line: number; language: string; commands: { line: number; text: string }[] }[] = [];
        let section = '';
        for (const p of pieces) {
          if (p.kind === 'heading') {
            lines.push(`${'#'.repeat(p.level)} ${p.text}`);
            section = p.text;
          } else if (p.kind === 'prose') lines.push(p.text, '');
          else {
            lines.push(`\`\`\`${p.language}`);
            const fenceLine = lines.length;
            const commands = p.lines.flatMap((text, index) => (text === '' || text.startsWith('#') ? [] : [{ line: fenceLine + 1 + index, text }]));
            lines.push(...p.lines, '```');
            if (p.kind === 'shell') expected.push({ section, line: fenceLine, language: 'shell', commands });
            if (p.kind === 'yaml') expected.push({ section, line: fenceLine, language: 'yaml', commands: [{ line: fenceLine + 1, text: p.lines.join('\n') }] });
          }
        }
        expect(extractExamples(lines.join('\n'))).toEqual(expected);
      }),
    );
  });
});
