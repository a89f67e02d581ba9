import Database from 'better-sqlite3';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ClawError, isClawError } from '../core/errors.js';
import { compileFilter, parseFilter, type FilterExpr, type FilterField } from './filter.js';

type TextField = Exclude<FilterField, 'id'>;
type CompareOp = Extract<FilterExpr, { kind: 'compare' }>['op'];

function errorOf(text: string): ClawError {
  try {
    parseFilter(text);
  } catch (error) {
    expect(isClawError(error, 'usage')).toBe(true);
    return error as ClawError;
  }
  throw new Error(`expected ${JSON.stringify(text)} to be rejected`);
}

describe('parseFilter and compileFilter', () => {
  it.each([
    ["type = 'message' AND source = 'self'", '((type = ?) AND (source = ?))', ['message', 'self']],
    ["source LIKE 'external:%'", '(source LIKE ?)', ['external:%']],
    ["id > 10 AND (subtype IS NULL OR subtype IN ('toolcall','error'))", '((id > ?) AND ((subtype IS NULL) OR (subtype IN (?, ?))))', [10, 'toolcall', 'error']],
    ["NOT type = 'record'", '(NOT (type = ?))', ['record']],
    ["type <> 'a' or type != 'b'", '((type <> ?) OR (type <> ?))', ['a', 'b']],
    ["source not like 'x%' and subtype is not null", '((source NOT LIKE ?) AND (subtype IS NOT NULL))', ['x%']],
    ["type NOT GLOB '*[a-z]' AND id NOT IN (-1, 2.5)", '((type NOT GLOB ?) AND (id NOT IN (?, ?)))', ['*[a-z]', -1, 2.5]],
    ["created_at >= '2026-11-21T10:00:00.000Z'", '(created_at >= ?)', ['2026-11-21T10:00:00.000Z']],
    ["type = 'it''s'", '(type = ?)', ["it's"]],
  ])('accepts %s', (text, sql, params) => {
    expect(compileFilter(parseFilter(text))).toEqual({ sql, params });
  });

  it('gives NOT precedence over AND, and AND over OR', () => {
    const a = { kind: 'compare', field: 'id', op: '=', value: 1 } as const;
    const b = { kind: 'compare', field: 'id', op: '=', value: 2 } as const;
    const c = { kind: 'compare', field: 'id', op: '=', value: 3 } as const;
    expect(parseFilter('id = 1 OR id = 2 AND id = 3')).toEqual({ kind: 'or', left: a, right: { kind: 'and', left: b, right: c } });
    expect(parseFilter('NOT id = 1 AND id = 2')).toEqual({ kind: 'and', left: { kind: 'not', operand: a }, right: b });
    expect(parseFilter('id = 1 OR id = 2 OR id = 3')).toEqual({ kind: 'or', left: { kind: 'or', left: a, right: b }, right: c });
  });

  it.each([
    ['0) UNION SELECT * FROM events --', 1],
    ["type = 'a'; DROP TABLE events", 11],
    ["content = 'x'", 1],
    ['type = message', 8],
    ["id = 'x'", 6],
    ['type = 5', 8],
    ["id LIKE '1%'", 4],
    ['type =', 7],
    ['', 1],
    ['   ', 4],
    ["(type = 'a'", 12],
    ["type = 'a')", 11],
    ["((type = 'a') OR id = 1", 24],
    ["type = 'a' source = 'b'", 12],
    ['type = "message"', 8],
    ["type = 'unterminated", 8],
    ["TYPE = 'a'", 1],
    ['id IN ()', 8],
    ['id = 1.', 6],
    ["type IS 'a'", 9],
    ["type NOT = 'a'", 10],
    ["'😀' = type", 1],
    ["type = '😀' AND 😀", 16],
  ])('rejects %s at position %i', (text, position) => {
    expect(errorOf(text).message).toContain(`invalid filter at position ${position}:`);
  });

  it('names the fields, suggests single quotes and teaches the language', () => {
    expect(errorOf("content = 'x'").message).toContain('id, source, type, subtype, created_at');
    expect(errorOf('type = "x"').suggestion).toContain('single quotes');
    expect(errorOf('type = message').message).toContain("expected a string literal after '=', found 'message'");
    expect(errorOf('type =').suggestion).toBeTruthy();
  });

  it('bounds length and nesting', () => {
    const nested = (n: number) => `${'('.repeat(n)}id = 1${')'.repeat(n)}`;
    expect(() => parseFilter(nested(64))).not.toThrow();
    expect(errorOf(nested(65)).message).toContain('position 65:');
    expect(errorOf(`${'NOT '.repeat(100_000)}id = 1`).message).toContain('4096');
    expect(errorOf(`${'NOT '.repeat(1000)}id = 1`).message).toContain('nested deeper than 64');
    expect(errorOf(`${'('.repeat(1000)}`).message).toContain('nested deeper than 64');

    // The longest filters still compile to SQL that SQLite accepts (it caps expression depth).
    const long = `id = 1${' OR id = 1'.repeat(409)}`;
    expect(long).toHaveLength(4096);
    const db = new Database(':memory:');
    db.exec('CREATE TABLE events(id INTEGER PRIMARY KEY, source TEXT, type TEXT, subtype TEXT, created_at TEXT)');
    const { sql, params } = compileFilter(parseFilter(long));
    expect(db.prepare(`SELECT count(*) AS n FROM events WHERE ${sql}`).get(...params)).toEqual({ n: 0 });
    db.close();
  });

  it('refuses ASTs that name unknown fields or operators, since those are written into the SQL', () => {
    const badField = { kind: 'null', field: 'content) OR (1', negated: false } as unknown as FilterExpr;
    const badOp = { kind: 'compare', field: 'id', op: 'constructor', value: 1 } as unknown as FilterExpr;
    expect(() => compileFilter(badField)).toThrow(ClawError);
    expect(() => compileFilter(badOp)).toThrow(ClawError);
  });
});

// ---- Property tests: a generated event table, generated filters and a reference evaluator ----

interface Row {
  id: number;
  source: string;
  type: string;
  subtype: string | null;
  created_at: string;
}

const SOURCES = ['self', 'external:telegram', 'External:Mail', 'cron', "o'brien", 'a_b%c'];
const TYPES = ['message', 'Message', 'record', 'toolcall', 'ü😀', 'x;y'];
const SUBTYPES = ['toolcall', 'error', 'TOOLCALL', '[x]*?', 'é'];
const TIMES = ['2026-11-21T10:00:00.000Z', '2026-11-21T10:00:00.001Z', '2025-01-01T00:00:00.000Z', '2026-12-01T23:59:59.999Z'];
const POOL = [...SOURCES, ...TYPES, ...SUBTYPES, ...TIMES];
const TEXT_FIELDS: TextField[] = ['source', 'type', 'subtype', 'created_at'];
const OPS: CompareOp[] = ['=', '!=', '<', '<=', '>', '>='];

const rowsArb = fc
  .array(
    fc.record({
      source: fc.constantFrom(...SOURCES),
      type: fc.constantFrom(...TYPES),
      subtype: fc.constantFrom(null, ...SUBTYPES),
      created_at: fc.constantFrom(...TIMES),
    }),
    { maxLength: 20, size: 'medium' },
  )
  .map((rows) => rows.map((row, i): Row => ({ id: i + 1, ...row })));

const nastyChar = fc.constantFrom("'", "''", '%', '_', ';', '"', '-', '--', '(', ')', '\\', ' ', 'a', 'A', 'é', 'ü', '😀', '\n', '?', '*');
const textLiteral = fc.oneof({ arbitrary: fc.constantFrom(...POOL), weight: 3 }, fc.string({ unit: nastyChar, maxLength: 6 }), fc.string({ unit: 'grapheme', maxLength: 4 }));
const numberLiteral = fc.oneof(
  fc.integer({ min: -3, max: 24 }),
  fc.integer({ min: -40, max: 100 }).map((n) => (n === 0 ? 0 : n / 4)),
);

/** Rewrites some code points of a real value with `edits`, so patterns often nearly match. */
const mutated = (values: string[], ...edits: ((c: string) => string)[]) =>
  fc
    .tuple(
      fc.constantFrom(...values),
      fc.array(fc.oneof({ arbitrary: fc.constant((c: string) => c), weight: 4 * edits.length }, fc.constantFrom(...edits)), {
        minLength: 12,
        maxLength: 12,
      }),
    )
    .map(([value, edits]) => [...value].map((c, i) => edits[i % edits.length]!(c)).join(''));

const ascii = POOL.filter((s) => /^[\x20-\x7e]*$/.test(s));
// LIKE patterns stay ASCII so that its ASCII-only case folding is unambiguous.
const likePattern = fc.oneof(
  fc.string({ unit: fc.constantFrom('%', '_', 'a', 'E', 'e', 's', 'M', 'm', ':', "'", ';', '[', '*', ' '), maxLength: 6 }),
  mutated(
    ascii,
    (c) => c.toUpperCase(),
    (c) => c.toLowerCase(),
    () => '_',
    () => '%',
    () => '',
  ),
);
const globClass = fc
  .tuple(fc.boolean(), fc.array(fc.constantFrom('a', 'e', 'M', 's', 'ü', 'a-f', 'm-t', 'A-Z'), { minLength: 1, maxLength: 3 }))
  .map(([negate, members]) => `[${negate ? '^' : ''}${members.join('')}]`);
const globPattern = fc.oneof(
  fc.array(fc.oneof(fc.constantFrom('*', '?', 'a', 'e', 'M', 'm', 's', ':', "'", 'ü', '😀', '%', '_'), globClass), { maxLength: 6 }).map((parts) => parts.join('')),
  mutated(
    POOL.filter((s) => !/[[\]*?]/.test(s)),
    () => '?',
    () => '*',
    () => '',
    () => '[a-z]',
  ),
);

const textField = fc.constantFrom(...TEXT_FIELDS);
const leafArb: fc.Arbitrary<FilterExpr> = fc.oneof(
  fc.tuple(fc.constantFrom(...OPS), numberLiteral).map(([op, value]): FilterExpr => ({ kind: 'compare', field: 'id', op, value })),
  fc.tuple(textField, fc.constantFrom(...OPS), textLiteral).map(([field, op, value]): FilterExpr => ({ kind: 'compare', field, op, value })),
  fc.tuple(textField, fc.boolean(), likePattern).map(([field, negated, pattern]): FilterExpr => ({ kind: 'like', field, negated, pattern })),
  fc.tuple(textField, fc.boolean(), globPattern).map(([field, negated, pattern]): FilterExpr => ({ kind: 'glob', field, negated, pattern })),
  fc
    .tuple(fc.boolean(), fc.array(numberLiteral, { minLength: 1, maxLength: 4 }))
    .map(([negated, values]): FilterExpr => ({ kind: 'in', field: 'id', negated, values: values as [number, ...number[]] })),
  fc
    .tuple(textField, fc.boolean(), fc.array(textLiteral, { minLength: 1, maxLength: 4 }))
    .map(([field, negated, values]): FilterExpr => ({ kind: 'in', field, negated, values: values as [string, ...string[]] })),
  fc.tuple(fc.constantFrom<FilterField>('id', ...TEXT_FIELDS), fc.boolean()).map(([field, negated]): FilterExpr => ({ kind: 'null', field, negated })),
);
const { expr: exprArb } = fc.letrec<{ expr: FilterExpr }>((tie) => ({
  expr: fc.oneof(
    { maxDepth: 6, depthSize: 'small' },
    leafArb,
    fc.tuple(fc.constantFrom('and' as const, 'or' as const), tie('expr'), tie('expr')).map(([kind, left, right]): FilterExpr => ({ kind, left, right })),
    tie('expr').map((operand): FilterExpr => ({ kind: 'not', operand })),
  ),
}));

interface Style {
  lower: boolean;
  angle: boolean;
  parens: boolean;
}
const styleArb = fc.record({ lower: fc.boolean(), angle: fc.boolean(), parens: fc.boolean() });

/** Prints an AST back to filter text, with only the parentheses precedence needs unless `parens`. */
function print(expr: FilterExpr, style: Style = { lower: false, angle: false, parens: false }): string {
  const kw = (word: string) => (style.lower ? word.toLowerCase() : word);
  const lit = (value: string | number) => (typeof value === 'number' ? String(value) : `'${value.replaceAll("'", "''")}'`);
  const sub = (e: FilterExpr, wrap: boolean) => (wrap || style.parens ? `(${print(e, style)})` : print(e, style));
  const not = (negated: boolean) => (negated ? `${kw('NOT')} ` : '');
  switch (expr.kind) {
    case 'or':
      return `${sub(expr.left, false)} ${kw('OR')} ${sub(expr.right, expr.right.kind === 'or')}`;
    case 'and':
      return `${sub(expr.left, expr.left.kind === 'or')} ${kw('AND')} ${sub(expr.right, expr.right.kind === 'or' || expr.right.kind === 'and')}`;
    case 'not':
      return `${kw('NOT')} ${sub(expr.operand, expr.operand.kind === 'or' || expr.operand.kind === 'and')}`;
    case 'compare':
      return `${expr.field} ${expr.op === '!=' && style.angle ? '<>' : expr.op} ${lit(expr.value)}`;
    case 'like':
    case 'glob':
      return `${expr.field} ${not(expr.negated)}${kw(expr.kind.toUpperCase())} ${lit(expr.pattern)}`;
    case 'in':
      return `${expr.field} ${not(expr.negated)}${kw('IN')} (${expr.values.map(lit).join(', ')})`;
    case 'null':
      return `${expr.field} ${kw('IS')} ${not(expr.negated)}${kw('NULL')}`;
  }
}

// SQLite's BINARY collation compares UTF-8 bytes, which orders by code point, unlike JS `<`.
function compare(a: string | number, b: string | number): number {
  if (typeof a === 'number' && typeof b === 'number') return Math.sign(a - b);
  return Buffer.compare(Buffer.from(String(a), 'utf8'), Buffer.from(String(b), 'utf8'));
}

const escapeRegex = (c: string) => c.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');

function likeMatches(value: string, pattern: string): boolean {
  const body = [...pattern].map((c) => (c === '%' ? '[^]*' : c === '_' ? '[^]' : /[a-z]/i.test(c) ? `[${c.toLowerCase()}${c.toUpperCase()}]` : escapeRegex(c))).join('');
  return new RegExp(`^${body}$`, 'u').test(value);
}

function globMatches(value: string, pattern: string): boolean {
  const chars = [...pattern];
  let body = '';
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === '[') {
      // Generated classes are well formed and use only letters and ranges, as regex classes do.
      const end = chars.indexOf(']', i + 1);
      body += chars.slice(i, end + 1).join('');
      i = end;
    } else body += c === '*' ? '[^]*' : c === '?' ? '[^]' : escapeRegex(c);
  }
  return new RegExp(`^${body}$`, 'u').test(value);
}

/** SQLite's three-valued logic: `null` is unknown, and WHERE keeps only `true`. */
function evaluate(expr: FilterExpr, row: Row): boolean | null {
  const negate = (v: boolean | null, negated: boolean) => (v === null ? null : v !== negated);
  switch (expr.kind) {
    case 'and': {
      const [l, r] = [evaluate(expr.left, row), evaluate(expr.right, row)];
      return l === false || r === false ? false : l === null || r === null ? null : true;
    }
    case 'or': {
      const [l, r] = [evaluate(expr.left, row), evaluate(expr.right, row)];
      return l === true || r === true ? true : l === null || r === null ? null : false;
    }
    case 'not':
      return negate(evaluate(expr.operand, row), true);
    case 'null':
      return (row[expr.field] === null) !== expr.negated;
  }
  const value = row[expr.field];
  if (value === null) return null;
  switch (expr.kind) {
    case 'compare': {
      const c = compare(value, expr.value);
      const results: Record<CompareOp, boolean> = { '=': c === 0, '!=': c !== 0, '<': c < 0, '<=': c <= 0, '>': c > 0, '>=': c >= 0 };
      return results[expr.op];
    }
    case 'like':
      return negate(likeMatches(String(value), expr.pattern), expr.negated);
    case 'glob':
      return negate(globMatches(String(value), expr.pattern), expr.negated);
    case 'in':
      return negate(
        expr.values.some((v: string | number) => compare(value, v) === 0),
        expr.negated,
      );
  }
}

function literals(expr: FilterExpr): (string | number)[] {
  switch (expr.kind) {
    case 'and':
    case 'or':
      return [...literals(expr.left), ...literals(expr.right)];
    case 'not':
      return literals(expr.operand);
    case 'compare':
      return [expr.value];
    case 'like':
    case 'glob':
      return [expr.pattern];
    case 'in':
      return [...expr.values];
    case 'null':
      return [];
  }
}

describe('filter properties', () => {
  it('parse(print(ast)) gives back the AST', () => {
    fc.assert(
      fc.property(exprArb, styleArb, (expr, style) => {
        expect(parseFilter(print(expr, style))).toEqual(expr);
      }),
      { numRuns: 500 },
    );
  });

  it('selects the same events in SQLite as the reference evaluator', () => {
    fc.assert(
      fc.property(rowsArb, exprArb, (rows, expr) => {
        const db = new Database(':memory:');
        try {
          db.exec(
            'CREATE TABLE events(id INTEGER PRIMARY KEY AUTOINCREMENT, created_at TEXT NOT NULL, source TEXT NOT NULL, ' +
              'type TEXT NOT NULL, subtype TEXT, content TEXT NOT NULL, idempotency_key TEXT)',
          );
          const insert = db.prepare('INSERT INTO events(created_at, source, type, subtype, content) VALUES (?, ?, ?, ?, ?)');
          for (const row of rows) insert.run(row.created_at, row.source, row.type, row.subtype, 'content');
          const { sql, params } = compileFilter(parseFilter(print(expr)));
          const actual = db
            .prepare(`SELECT id FROM events WHERE ${sql} ORDER BY id`)
            .pluck()
            .all(...params);
          const expected = rows.filter((row) => evaluate(expr, row) === true).map((row) => row.id);
          expect(actual).toEqual(expected);
        } finally {
          db.close();
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('puts every literal into params and none into the SQL', () => {
    const sqlToken = /\s+|[(),?]|<>|<=|>=|=|<|>|\b(?:AND|OR|NOT|LIKE|GLOB|IN|IS|NULL|id|source|type|subtype|created_at)\b/y;
    fc.assert(
      fc.property(exprArb, (expr) => {
        const { sql, params } = compileFilter(parseFilter(print(expr)));
        expect(params).toEqual(literals(expr));
        expect(sql.split('?').length - 1).toBe(params.length);
        // Everything in the SQL is one of the compiler's own tokens.
        for (sqlToken.lastIndex = 0; sqlToken.lastIndex < sql.length; ) {
          expect(sqlToken.exec(sql), `unexpected SQL at ${sqlToken.lastIndex}: ${sql}`).not.toBeNull();
        }
        for (const value of params) {
          if (typeof value === 'string' && value.trim() !== '' && !/^[\w\s()=<>?,]*$/.test(value)) expect(sql).not.toContain(value);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('either parses any string or throws a usage ClawError', () => {
    const near = fc
      .array(
        fc.oneof(
          fc.constantFrom('(', ')', ',', 'NOT', 'and', 'OR', 'IS', 'NULL', 'LIKE', 'glob', 'IN', '=', '<>', '!', '<=', '-', '.', "'", "''", '"', ';', '--'),
          fc.constantFrom('id', 'type', 'subtype', 'content', 'x', '1', '-2.5', '1.', "'a'", "'it''s", '😀'),
        ),
        { maxLength: 12 },
      )
      .chain((parts) => fc.constantFrom(parts.join(' '), parts.join('')));
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary' }), near), (text) => {
        try {
          compileFilter(parseFilter(text));
        } catch (error) {
          expect(isClawError(error, 'usage'), String(error)).toBe(true);
        }
      }),
      { numRuns: 2000 },
    );
  });
});
