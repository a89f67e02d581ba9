import * as z from 'zod/mini';
import { afterEach, describe, expect, it } from 'vitest';
import { validate } from './validate.js';

const Schema = z.strictObject({ port: z.int(), name: z.string().check(z.minLength(2, 'name is too short')) });
const check = (value: unknown) => () => validate(Schema, value, { what: 'config', suggestion: 'fix it' });

describe('validate', () => {
  afterEach(() => {
    z.config({ localeError: undefined });
  });

  it("words issues its own way even after a library installed zod's English locale in the process", () => {
    z.config(z.locales.en()); // what importing pi-ai or playwright-core does
    expect(check({ port: 'four', name: 'ok', extra: 1 })).toThrow('invalid config: port: must be a number, got "four"; unknown key extra');
    expect(check({ port: 1, name: 'x' })).toThrow('invalid config: name is too short');
  });
});
