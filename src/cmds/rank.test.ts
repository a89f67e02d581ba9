import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareEntries, matchEntry, normalizeQuery, queryWords, rankEntries, stem, tokenize } from './rank.js';
import type { Entry, EntryKind } from './types.js';

const own = (name: string, description = ''): Entry => ({ name, kind: 'theclaw', description });
const skill = (name: string, description = ''): Entry => ({ name, kind: 'skill', description, path: `/skills/${name}/SKILL.md` });
const exe = (name: string, description = '', curated = false): Entry => ({
  name,
  kind: 'executable',
  description,
  path: `/usr/bin/${name}`,
  ...(curated ? { curated: true } : {}),
});

const names = (entries: readonly Entry[], query: string) => rankEntries(entries, query).map((match) => match.entry.name);

describe('stem', () => {
  it.each([
    ['files', 'file'],
    ['filing', 'file'],
    ['directories', 'directory'],
    ['processes', 'process'],
    ['matches', 'match'],
    ['running', 'run'],
    ['installed', 'install'],
    ['compressed', 'compress'],
    ['changes', 'changing'],
  ])('%s and %s meet at one stem', (a, b) => {
    expect(stem(a)).toBe(stem(b));
  });

  it('leaves short words and words ending in ss/us/is alone', () => {
    expect(stem('ls')).toBe('ls');
    expect(stem('cat')).toBe('cat');
    expect(stem('status')).toBe('status');
    expect(stem('process')).toBe('process');
  });

  it('gives a plural the stem of its singular (word ending in a plain consonant + s)', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z]{2,10}[bcdfgkmnprtw]$/), (word) => {
        expect(stem(`${word}s`)).toBe(stem(word));
      }),
    );
  });

  it('is case-insensitive', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-zA-Z]{0,12}$/), (word) => {
        expect(stem(word)).toBe(stem(word.toLowerCase()));
      }),
    );
  });
});

describe('queryWords', () => {
  it('drops stop words, stems and dedupes', () => {
    expect(queryWords('How do I list the files, files?')).toEqual(['list', stem('files')]);
  });

  it('keeps stop words when the query is nothing else', () => {
    expect(queryWords('the')).toEqual(['the']);
  });

  it('splits on punctuation like names do', () => {
    expect(tokenize('git-shell (1)')).toEqual(['git', 'shell', '1']);
    expect(normalizeQuery('  Thread\t  Push ')).toBe('thread push');
  });
});

describe('rankEntries', () => {
  const catalog: Entry[] = [
    own('thread', 'Durable event streams: push, pop, peek'),
    own('thread push', 'append one event'),
    own('thread pop', 'read the next events of a consumer'),
    own('notifier timer add', 'add a timer'),
    skill('weather', 'Get the current weather and forecasts'),
    exe('ls', 'list files and directories', true),
    exe('lsof', 'list open files'),
    exe('lsattr', 'list file attributes on a Linux second extended file system'),
    exe('find', 'find files and directories by name', true),
    exe('threadctl', 'a made-up executable'),
    exe('nm', 'list symbols from object files'),
  ];

  it('puts an exact name match first, then names starting with the query', () => {
    expect(names(catalog, 'thread')).toEqual(['thread', 'thread pop', 'thread push', 'threadctl']);
  });

  it('ranks a subcommand path first when the query names it exactly', () => {
    expect(names(catalog, 'thread push')[0]).toBe('thread push');
    expect(names(catalog, 'Notifier  Timer add')[0]).toBe('notifier timer add');
  });

  it('ranks by the number of query words found, with stemming, curated executables first among equals', () => {
    expect(names(catalog, 'list files').slice(0, 4)).toEqual(['ls', 'nm', 'lsof', 'lsattr']);
    expect(names(catalog, 'how do I list the files')[0]).toBe('ls');
  });

  it('prefers words found in the name among entries with as many words found', () => {
    expect(names(catalog, 'find files')[0]).toBe('find');
  });

  it('puts TheClaw commands and skills before executables that match as well', () => {
    const entries = [exe('aaa', 'forecast tool'), skill('zzzz', 'weather forecast'), own('yyyyy', 'forecast')];
    expect(names(entries, 'forecast')).toEqual(['zzzz', 'yyyyy', 'aaa']);
  });

  it('matches nothing for an empty query', () => {
    expect(rankEntries(catalog, '   ')).toEqual([]);
  });

  it('matches long words by prefix (compress finds compression) but not short ones (list does not find listen)', () => {
    const entries = [exe('xz', 'Compression utility'), exe('nc', 'listen on a port')];
    expect(names(entries, 'compress')).toEqual(['xz']);
    expect(names(entries, 'list')).toEqual([]);
  });

  const arbitraryEntry = fc.record({
    name: fc.stringMatching(/^[a-z][a-z0-9-]{0,8}( [a-z]{1,6})?$/),
    kind: fc.constantFrom<EntryKind>('theclaw', 'skill', 'executable'),
    description: fc.array(fc.constantFrom('list', 'files', 'copy', 'thread', 'push', 'event', 'the', 'a', 'timer'), { maxLength: 6 }).map((w) => w.join(' ')),
    curated: fc.boolean(),
  });
  const uniqueEntries = fc.uniqueArray(arbitraryEntry, { selector: (e) => `${e.kind}:${e.name}`, maxLength: 30 });
  const arbitraryQuery = fc.constantFrom('list files', 'thread', 'push', 'a', 'copy the files', 'timer', 'x', 'thread push');

  it('does not depend on the order of the entries', () => {
    fc.assert(
      fc.property(
        uniqueEntries.chain((entries) => fc.tuple(fc.constant(entries), fc.shuffledSubarray(entries, { minLength: entries.length }))),
        arbitraryQuery,
        ([entries, shuffled], query) => {
          expect(names(shuffled, query)).toEqual(names(entries, query));
        },
      ),
    );
  });

  it('returns only matching entries, each at most once, sorted by its comparator', () => {
    fc.assert(
      fc.property(uniqueEntries, arbitraryQuery, (entries, query) => {
        const ranked = rankEntries(entries, query);
        expect(new Set(ranked.map((m) => m.entry)).size).toBe(ranked.length);
        for (const match of ranked) expect(matchEntry(match.entry, query)).toEqual(match);
        for (let i = 1; i < ranked.length; i++) {
          const [a, b] = [ranked[i - 1]!, ranked[i]!];
          expect(a.tier < b.tier || (a.tier === b.tier && (a.tier < 2 || a.hits >= b.hits))).toBe(true);
        }
      }),
    );
  });

  it('always ranks an entry named exactly like the query first', () => {
    fc.assert(
      fc.property(
        uniqueEntries.filter((e) => e.length > 0),
        fc.nat(),
        (entries, index) => {
          const target = entries[index % entries.length]!;
          expect(rankEntries(entries, target.name.toUpperCase())[0]?.entry.name).toBe(target.name);
        },
      ),
    );
  });

  it('orders ties: own and skills, curated, shorter, alphabetical', () => {
    const sorted = [exe('b'), exe('a'), exe('zz', '', true), skill('ccc'), own('dddd'), exe('aa')].sort(compareEntries).map((e) => e.name);
    expect(sorted).toEqual(['ccc', 'dddd', 'zz', 'a', 'b', 'aa']);
  });
});
