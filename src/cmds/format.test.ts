import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FIND_BUDGET_BYTES, formatFind, formatInfo, formatList, truncateLine } from './format.js';
import type { Entry, EntryKind } from './types.js';
import { WELL_KNOWN } from './well-known.js';

const entry = (name: string, kind: EntryKind, description: string): Entry => ({ name, kind, description });

describe('truncateLine', () => {
  it('returns one line of at most the limit, unchanged when it fits', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), fc.integer({ min: 2, max: 120 }), (text, max) => {
        const line = truncateLine(text, max);
        expect([...line].length).toBeLessThanOrEqual(max);
        expect(line).not.toMatch(/[\n\r]/);
        const flat = text.replace(/\s+/g, ' ').trim();
        if ([...flat].length <= max) expect(line).toBe(flat);
        else expect(line.endsWith('…')).toBe(true);
      }),
    );
  });
});

describe('formatFind', () => {
  const entries = [
    entry('thread push', 'theclaw', 'append one event'),
    entry('weather', 'skill', 'Get the weather'),
    entry('ls', 'executable', 'list files and directories'),
    entry('mystery', 'executable', ''),
  ];

  it('writes compact Markdown for a pipe, marking skills', () => {
    expect(formatFind(entries, 'markdown')).toBe(
      [
        '- `thread push` — append one event',
        '- `weather` (skill) — Get the weather',
        '- `ls` — list files and directories',
        '- `mystery`',
        '',
        'Usage, options, examples: `cmds info <name>`',
        '',
      ].join('\n'),
    );
  });

  it('aligns columns for a terminal', () => {
    expect(formatFind(entries, 'text').split('\n').slice(0, 4)).toEqual([
      'thread push  theclaw     append one event',
      'weather      skill       Get the weather',
      'ls           executable  list files and directories',
      'mystery      executable',
    ]);
  });

  it('stays within the byte budget whatever the entries, keeping the best ones', () => {
    const arbitraryEntry = fc.record({
      name: fc.string({ minLength: 1, maxLength: 200 }),
      kind: fc.constantFrom<EntryKind>('theclaw', 'skill', 'executable'),
      description: fc.string({ maxLength: 1000 }),
    });
    fc.assert(
      fc.property(fc.array(arbitraryEntry, { maxLength: 40 }), fc.constantFrom('text' as const, 'markdown' as const), (list, mode) => {
        const out = formatFind(list, mode, { maxBytes: FIND_BUDGET_BYTES });
        expect(Buffer.byteLength(out)).toBeLessThan(2048);
        if (list.length > 0) expect(out.split('\n')[0]).toContain(truncateLine(list[0]!.name, 60).slice(0, 10));
      }),
    );
  });
});

describe('formatList', () => {
  it('groups by kind and says how many executables were left out', () => {
    const out = formatList([entry('thread', 'theclaw', 'streams'), entry('ls', 'executable', 'list files')], 'markdown', { omittedExecutables: 42 });
    expect(out).toBe('## TheClaw commands\n- `thread` — streams\n\n## Executables on PATH\n- `ls` — list files\n\n(42 more executables on PATH: `cmds find <words>`, or `cmds list --all`)\n');
  });
});

describe('formatInfo', () => {
  it('prints a skill with its path and says where the rest is when cut', () => {
    const skill = { name: 'weather', kind: 'skill' as const, description: 'Get the weather', path: '/s/weather/SKILL.md', dir: '/s/weather' };
    const out = formatInfo({ kind: 'skill', skill, body: '# Weather\nRun curl.\n', truncated: true }, 'markdown');
    expect(out).toBe('# weather (skill)\nGet the weather\nPath: /s/weather/SKILL.md\n\n# Weather\nRun curl.\n… (truncated; read it all: cat /s/weather/SKILL.md)\n');
  });

  it('prints an executable with its path and where to learn more', () => {
    const executable = { name: 'jq', kind: 'executable' as const, description: 'query JSON', path: '/usr/bin/jq' };
    expect(formatInfo({ kind: 'executable', executable }, 'text')).toBe('jq (executable) - query JSON\nPath: /usr/bin/jq\nMore: jq --help, or man jq\n');
  });
});

describe('WELL_KNOWN', () => {
  it('has one-line descriptions that are never cut', () => {
    for (const [name, description] of Object.entries(WELL_KNOWN)) expect(truncateLine(description), name).toBe(description);
  });
});
