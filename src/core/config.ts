import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import type * as z from 'zod/mini';
import { ClawError, errnoCode } from './errors.js';
import { validate } from './validate.js';
import { ensureDir } from './home.js';

// yaml is loaded on first use (synchronously, through require): the hot paths — a delivery, a
// push — never read a config, and its ~60 modules cost them start-up time. Every module that
// reads or writes YAML goes through this.
export const yaml = (): typeof import('yaml') => createRequire(import.meta.url)('yaml') as typeof import('yaml');

/**
 * Reads a tool's YAML config. A missing file is an empty config (every field has a default);
 * a file that is not YAML or does not match the schema is an `invalid` error naming each field.
 */
export function loadYamlConfig<S extends z.ZodMiniType>(file: string, schema: S): z.output<S> {
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if (errnoCode(error) !== 'ENOENT') {
      throw new ClawError('invalid', `cannot read ${file}: ${(error as Error).message}`, { suggestion: 'make it a readable file, or remove it to use the defaults', cause: error });
    }
  }
  let raw: unknown;
  try {
    raw = text === undefined ? {} : (yaml().parse(text) ?? {}); // no file: yaml is not even loaded
  } catch (error) {
    throw new ClawError('invalid', `cannot read ${file}: ${yamlReason(error)}`, { suggestion: 'fix the YAML syntax', cause: error });
  }
  return validate(schema, raw, { what: file, suggestion: 'fix the listed fields or remove them to use the defaults' });
}

/**
 * Sets one top-level key in a YAML config file (or removes it, for `undefined`), keeping its
 * comments and other keys, and replaces the file atomically (a reader never sees it
 * half-written). Mode 0600: it may hold keys.
 */
export function setYamlConfigKey(file: string, key: string, value: unknown): void {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if (errnoCode(error) !== 'ENOENT') throw error;
  }
  const document = yaml().parseDocument(text);
  if (document.errors.length > 0) {
    throw new ClawError('invalid', `cannot read ${file}: ${yamlReason(document.errors[0])}`, { suggestion: 'fix the YAML syntax first' });
  }
  if (value === undefined) document.delete(key);
  else document.set(key, value);
  ensureDir(dirname(file));
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, document.toString(), { mode: 0o600 });
  renameSync(temp, file);
}

/** yaml's message goes on with a picture of the line under it; an error line takes its first line. */
function yamlReason(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!.replace(/:$/, '');
}
