import { usageError } from '../core/errors.js';

/**
 * The `--filter` language of `thread`: a small subset of an SQL WHERE clause over the event
 * columns, parsed into a typed AST and compiled to parameterized SQL. User text never reaches
 * the SQL string: field names come from a fixed list and every literal becomes a `?` parameter.
 */

export type FilterField = 'id' | 'source' | 'type' | 'subtype' | 'created_at';
/** The columns holding text; `id` is the only number. */
type TextField = Exclude<FilterField, 'id'>;
/** `<>` parses to `!=`: they mean the same, and one spelling keeps the AST canonical. */
type CompareOp = '=' | '!=' | '<' | '<=' | '>' | '>=';
/** Lists are never empty: `x IN ()` is not valid SQLite syntax. */
type NonEmpty<T> = readonly [T, ...T[]];

/**
 * Each variant pairs a field with literals of its type, so `id = 'x'` or `id LIKE '1%'` cannot be
 * built even by hand. `negated` spells `NOT LIKE`, `NOT GLOB`, `NOT IN` and `IS NOT NULL`; it is
 * kept apart from `not` so that printing an AST gives back the text it came from.
 */
export type FilterExpr =
  | { readonly kind: 'and'; readonly left: FilterExpr; readonly right: FilterExpr }
  | { readonly kind: 'or'; readonly left: FilterExpr; readonly right: FilterExpr }
  | { readonly kind: 'not'; readonly operand: FilterExpr }
  | { readonly kind: 'compare'; readonly field: 'id'; readonly op: CompareOp; readonly value: number }
  | { readonly kind: 'compare'; readonly field: TextField; readonly op: CompareOp; readonly value: string }
  | { readonly kind: 'like'; readonly field: TextField; readonly negated: boolean; readonly pattern: string }
  | { readonly kind: 'glob'; readonly field: TextField; readonly negated: boolean; readonly pattern: string }
  | { readonly kind: 'in'; readonly field: 'id'; readonly negated: boolean; readonly values: NonEmpty<number> }
  | { readonly kind: 'in'; readonly field: TextField; readonly negated: boolean; readonly values: NonEmpty<string> }
  | { readonly kind: 'null'; readonly field: FilterField; readonly negated: boolean };

export interface CompiledFilter {
  sql: string;
  params: (string | number)[];
}

const FIELDS: readonly string[] = ['id', 'source', 'type', 'subtype', 'created_at'] satisfies FilterField[];
const SQL_OPS: Readonly<Record<CompareOp, string>> = { '=': '=', '!=': '<>', '<': '<', '<=': '<=', '>': '>', '>=': '>=' };
// Bounds on hostile input: the parser recurses once per `(` or `NOT`, and SQLite refuses
// expressions nested deeper than 1000, which 4096 characters of `id = 1 OR ...` stay well below.
const MAX_LENGTH = 4096;
const MAX_DEPTH = 64;

const SUGGESTION =
  "write comparisons like type = 'message' AND source LIKE 'external:%' or id > 10 AND subtype IS NULL; " +
  "fields: id, source, type, subtype, created_at; strings in single quotes ('it''s'); combine with AND, OR, NOT and ( )";
const QUOTE_STRINGS = "put text in single quotes, like type = 'message' (write a quote inside as '')";
const ID_NUMBERS = 'id is a number: compare it with numbers, like id > 10 or id IN (1, 2, 3)';

type Token =
  | { readonly type: 'word' | 'symbol' | 'end'; readonly pos: number; readonly raw: string }
  | { readonly type: 'string'; readonly pos: number; readonly raw: string; readonly value: string }
  | { readonly type: 'number'; readonly pos: number; readonly raw: string; readonly value: number };

function fail(text: string, index: number, message: string, suggestion = SUGGESTION): never {
  // Positions count code points, so an emoji earlier in the filter does not shift the column.
  const position = [...text.slice(0, index)].length + 1;
  throw usageError(`invalid filter at position ${position}: ${message}`, suggestion);
}

function describe(token: Token): string {
  if (token.type === 'end') return 'end of filter';
  const raw = token.raw.length > 40 ? `${token.raw.slice(0, 37)}...` : token.raw;
  if (token.type === 'string') return `string ${raw}`;
  if (token.type === 'number') return `number ${raw}`;
  return `'${raw}'`;
}

const WORD = /[A-Za-z_][A-Za-z0-9_]*/y;
const NUMBER = /-?[0-9]+(?:\.[0-9]+)?/y;
const SYMBOLS = ['<>', '<=', '>=', '!=', '=', '<', '>', '(', ')', ','];

// Lazy, so that the first problem reported is the leftmost one, whether lexical or grammatical.
function* tokenize(text: string): Generator<Token, Token> {
  let i = 0;
  const match = (re: RegExp): string | undefined => {
    re.lastIndex = i;
    return re.exec(text)?.[0];
  };
  while (i < text.length) {
    const ch = text[i]!;
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    const pos = i;
    const word = match(WORD);
    const number = word === undefined ? match(NUMBER) : undefined;
    const symbol = SYMBOLS.find((s) => text.startsWith(s, i));
    if (word !== undefined) {
      i += word.length;
      yield { type: 'word', pos, raw: word };
    } else if (number !== undefined) {
      i += number.length;
      // `10abc` or `1.` would otherwise split into two tokens and give a confusing error later.
      if (/[A-Za-z0-9_.]/.test(text[i] ?? '')) fail(text, pos, `malformed number '${text.slice(pos, i + 1)}'`);
      // `|| 0` turns -0 into 0, which SQLite cannot tell apart anyway.
      yield { type: 'number', pos, raw: number, value: Number(number) || 0 };
    } else if (symbol !== undefined) {
      i += symbol.length;
      yield { type: 'symbol', pos, raw: symbol };
    } else if (ch === "'") {
      let value = '';
      for (i++; ; i += 2) {
        const close = text.indexOf("'", i);
        if (close < 0) fail(text, pos, 'unterminated string literal', QUOTE_STRINGS);
        value += text.slice(i, close);
        i = close;
        if (text[close + 1] !== "'") break;
        value += "'";
      }
      i++;
      yield { type: 'string', pos, raw: text.slice(pos, i), value };
    } else if (ch === '"') {
      fail(text, pos, 'double quotes are not string literals', QUOTE_STRINGS);
    } else {
      fail(text, pos, `unexpected character '${String.fromCodePoint(text.codePointAt(i)!)}'`);
    }
  }
  return { type: 'end', pos: text.length, raw: '' };
}

class Parser {
  private readonly tokens: Generator<Token, Token>;
  private current: Token;
  private depth = 0;
  constructor(private readonly text: string) {
    this.tokens = tokenize(text);
    this.current = this.tokens.next().value;
  }

  parse(): FilterExpr {
    const expr = this.or();
    const token = this.peek();
    if (token.type === 'symbol' && token.raw === ')') this.fail(token, "unmatched ')'");
    if (token.type !== 'end') this.fail(token, `expected AND, OR or end of filter, found ${describe(token)}`);
    return expr;
  }

  private or(): FilterExpr {
    let left = this.and();
    while (this.acceptKeyword('OR')) left = { kind: 'or', left, right: this.and() };
    return left;
  }

  private and(): FilterExpr {
    let left = this.unary();
    while (this.acceptKeyword('AND')) left = { kind: 'and', left, right: this.unary() };
    return left;
  }

  private unary(): FilterExpr {
    const token = this.peek();
    const isNot = this.isKeyword(token, 'NOT');
    if (!isNot && !(token.type === 'symbol' && token.raw === '(')) return this.predicate();
    if (++this.depth > MAX_DEPTH) this.fail(token, `nested deeper than ${MAX_DEPTH} levels of ( and NOT`);
    this.next();
    let expr: FilterExpr;
    if (isNot) {
      expr = { kind: 'not', operand: this.unary() };
    } else {
      expr = this.or();
      const close = this.next();
      if (close.type !== 'symbol' || close.raw !== ')') {
        const open = [...this.text.slice(0, token.pos)].length + 1;
        this.fail(close, `expected ')' to close the '(' at position ${open}, found ${describe(close)}`);
      }
    }
    this.depth--;
    return expr;
  }

  private predicate(): FilterExpr {
    const token = this.next();
    if (token.type !== 'word' || !FIELDS.includes(token.raw)) {
      const what = token.type === 'word' ? `unknown field '${token.raw}'` : `expected a field, found ${describe(token)}`;
      this.fail(token, `${what}; the fields are ${FIELDS.join(', ')}`);
    }
    const field = token.raw as FilterField;
    const op = this.next();
    const cmp = (op.raw === '<>' ? '!=' : op.raw) as CompareOp;
    if (op.type === 'symbol' && Object.hasOwn(SQL_OPS, cmp)) {
      const after = `after '${op.raw}'`;
      if (field === 'id') return { kind: 'compare', field, op: cmp, value: this.number(after) };
      return { kind: 'compare', field, op: cmp, value: this.string(after) };
    }
    if (this.isKeyword(op, 'IS')) {
      const negated = this.acceptKeyword('NOT');
      const null_ = this.next();
      if (!this.isKeyword(null_, 'NULL')) this.fail(null_, `expected NULL after IS, found ${describe(null_)}`);
      return { kind: 'null', field, negated };
    }
    const negated = this.isKeyword(op, 'NOT');
    const kw = negated ? this.next() : op;
    const name = kw.raw.toUpperCase();
    if (this.isKeyword(kw, 'LIKE') || this.isKeyword(kw, 'GLOB')) {
      if (field === 'id') this.fail(kw, `${name} matches text, but id is a number`, ID_NUMBERS);
      const kind = name === 'LIKE' ? 'like' : 'glob';
      return { kind, field, negated, pattern: this.string(`after ${name}`) };
    }
    if (this.isKeyword(kw, 'IN')) {
      if (field === 'id') return { kind: 'in', field, negated, values: this.list(() => this.number('in the IN list')) };
      return { kind: 'in', field, negated, values: this.list(() => this.string('in the IN list')) };
    }
    const expected = negated ? 'LIKE, GLOB or IN after NOT' : 'an operator (=, !=, <, <=, >, >=, LIKE, GLOB, IN, IS NULL)';
    return this.fail(kw, `expected ${expected} after '${field}', found ${describe(kw)}`);
  }

  private list<T>(item: () => T): NonEmpty<T> {
    const open = this.next();
    if (open.type !== 'symbol' || open.raw !== '(') this.fail(open, `expected '(' after IN, found ${describe(open)}`);
    const values: [T, ...T[]] = [item()];
    for (;;) {
      const token = this.next();
      if (token.type === 'symbol' && token.raw === ')') return values;
      if (token.type !== 'symbol' || token.raw !== ',') this.fail(token, `expected ',' or ')' in the IN list, found ${describe(token)}`);
      values.push(item());
    }
  }

  private number(where: string): number {
    const token = this.next();
    if (token.type === 'number') return token.value;
    if (token.type === 'string') this.fail(token, `id is a number, found ${describe(token)}`, ID_NUMBERS);
    return this.fail(token, `expected a number ${where}, found ${describe(token)}`, ID_NUMBERS);
  }

  private string(where: string): string {
    const token = this.next();
    if (token.type === 'string') return token.value;
    if (token.type === 'number') this.fail(token, `only id holds numbers; this field holds text, found ${describe(token)}`, QUOTE_STRINGS);
    return this.fail(token, `expected a string literal ${where}, found ${describe(token)}`, QUOTE_STRINGS);
  }

  private peek(): Token {
    return this.current;
  }

  private next(): Token {
    const token = this.current;
    if (token.type !== 'end') this.current = this.tokens.next().value;
    return token;
  }

  private isKeyword(token: Token, keyword: string): boolean {
    return token.type === 'word' && token.raw.toUpperCase() === keyword;
  }

  private acceptKeyword(keyword: string): boolean {
    const match = this.isKeyword(this.peek(), keyword);
    if (match) this.next();
    return match;
  }

  private fail(token: Token, message: string, suggestion?: string): never {
    return fail(this.text, token.pos, message, suggestion);
  }
}

/** Parses filter text; throws a `usage` ClawError naming the 1-based position of the problem. */
export function parseFilter(text: string): FilterExpr {
  if (text.length > MAX_LENGTH) {
    fail(text, MAX_LENGTH, `a filter has at most ${MAX_LENGTH} characters, this one has ${text.length}`);
  }
  return new Parser(text).parse();
}

/**
 * How a compiled filter is spelled for one database. Each gives the filter SQLite's meaning: NULL
 * makes comparisons unknown, text compares by bytes, LIKE ignores ASCII case and has no escape
 * character, GLOB does not ignore case.
 */
export interface FilterDialect {
  /** The placeholder of the parameter at `index` (1-based). */
  param(index: number): string;
  /** `column <op> param` where the parameter is a number compared with `id`. */
  number(param: string): string;
  like(column: string, negated: boolean, param: string): string;
  glob(column: string, negated: boolean, param: string): string;
  /** The value a GLOB's parameter gets: the pattern, or its translation. */
  globValue(pattern: string): string;
}

export const SQLITE_DIALECT: FilterDialect = {
  param: () => '?',
  number: (param) => param,
  like: (column, negated, param) => `${column} ${negated ? 'NOT ' : ''}LIKE ${param}`,
  glob: (column, negated, param) => `${column} ${negated ? 'NOT ' : ''}GLOB ${param}`,
  globValue: (pattern) => pattern,
};

/**
 * Compiles to a fully parenthesized expression over the `events` columns, a parameter for every
 * literal, numbered from `firstParam` (where the query's own parameters come first).
 */
export function compileFilter(expr: FilterExpr, dialect: FilterDialect = SQLITE_DIALECT, firstParam = 1): CompiledFilter {
  const params: (string | number)[] = [];
  const next = (value: string | number) => {
    params.push(value);
    return dialect.param(firstParam + params.length - 1);
  };
  const sql = emit(expr, dialect, next);
  return { sql, params };
}

function emit(expr: FilterExpr, dialect: FilterDialect, next: (value: string | number) => string): string {
  switch (expr.kind) {
    case 'and':
    case 'or':
      return `(${emit(expr.left, dialect, next)} ${expr.kind.toUpperCase()} ${emit(expr.right, dialect, next)})`;
    case 'not':
      return `(NOT ${emit(expr.operand, dialect, next)})`;
    case 'compare':
      return `(${column(expr.field)} ${operator(expr.op)} ${literal(expr.field, expr.value, dialect, next)})`;
    case 'like':
      return `(${dialect.like(column(expr.field), expr.negated, next(expr.pattern))})`;
    case 'glob':
      return `(${dialect.glob(column(expr.field), expr.negated, next(dialect.globValue(expr.pattern)))})`;
    case 'in': {
      const values = (expr.values as readonly (string | number)[]).map((value) => literal(expr.field, value, dialect, next));
      return `(${column(expr.field)} ${expr.negated ? 'NOT ' : ''}IN (${values.join(', ')}))`;
    }
    case 'null':
      return `(${column(expr.field)} IS ${expr.negated ? 'NOT ' : ''}NULL)`;
  }
}

function literal(field: FilterField, value: string | number, dialect: FilterDialect, next: (value: string | number) => string): string {
  return field === 'id' ? dialect.number(next(value)) : next(value);
}

// The types already forbid other fields and operators; this guards ASTs built by untyped code,
// since these two are the only AST parts that are written into the SQL text.
function column(field: string): string {
  return FIELDS.includes(field) ? field : invalid(`field ${JSON.stringify(field)}`);
}

function operator(op: string): string {
  return Object.hasOwn(SQL_OPS, op) ? SQL_OPS[op as CompareOp] : invalid(`operator ${JSON.stringify(op)}`);
}

function invalid(what: string): never {
  throw usageError(`invalid filter: unknown ${what}`, SUGGESTION);
}
