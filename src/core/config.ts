import { createHash } from 'node:crypto';
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
let loadedYaml: typeof import('yaml') | undefined;
export const yaml = (): typeof import('yaml') => (loadedYaml ??= createRequire(import.meta.url)('yaml') as typeof import('yaml'));

/**
 * Loads yaml as the one chunk tsup bundles it into (tsup.config.ts), for `yaml()` to use: a sixth of
 * the CPU of require's ~60 files (`web fetch`, which reads its config on the way: 130 ms of CPU on
 * a loaded machine). Import yaml only through this: a bundled CommonJS module's dynamic import
 * has its exports on `default` alone.
 */
export async function preloadYaml(): Promise<void> {
  // The module's exports are its default export, bundled (CommonJS in a chunk) or not (Node's import of CommonJS).
  loadedYaml ??= ((await import('yaml')) as unknown as { default: typeof import('yaml') }).default;
}

/**
 * Reads a tool's YAML config. A missing file is an empty config (every field has a default);
 * a file that is not YAML or does not match the schema is an `invalid` error naming each field.
 */
export function loadYamlConfig<S extends z.ZodMiniType>(file: string, schema: S): z.output<S> {
  return loadYamlConfigFile(file, schema).value;
}

/**
 * `loadYamlConfig`, with the fingerprint of the text it read: a daemon reports it, so that a
 * file changed since (what `theclaw status` compares) is told from the one it runs with.
 */
export function loadYamlConfigFile<S extends z.ZodMiniType>(file: string, schema: S): { value: z.output<S>; sha256: string } {
  const text = readConfigText(file);
  return { value: validate(schema, parseConfigText(file, text), { what: file, suggestion: 'fix the listed fields or remove them to use the defaults' }), sha256: textHash(text) };
}

/** The fingerprint of a config file as it is now (no file: that of an empty one); null when it cannot be read. */
export function configFileHash(file: string): string | null {
  try {
    return textHash(readConfigText(file));
  } catch {
    return null;
  }
}

/**
 * Whether a daemon's config file differs from the text it loaded (`loaded`: the fingerprint it
 * reports; null when it is not running, which loads nothing).
 */
export function configChangedSince(file: string, loaded: string | null | undefined): boolean {
  return typeof loaded === 'string' && configFileHash(file) !== loaded;
}

/** A config file's text; undefined when there is none. */
export function readConfigText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return undefined;
    throw new ClawError('invalid', `cannot read ${file}: ${(error as Error).message}`, { suggestion: 'make it a readable file, or remove it to use the defaults', cause: error });
  }
}

/** The YAML of a config file's text (no text, or an empty file: `{}`). */
export function parseConfigText(file: string, text: string | undefined): unknown {
  try {
    return text === undefined ? {} : (yaml().parse(text) ?? {}); // no file: yaml is not even loaded
  } catch (error) {
    throw new ClawError('invalid', `cannot read ${file}: ${yamlReason(error)}`, { suggestion: 'fix the YAML syntax', cause: error });
  }
}

/** The fingerprint of a config's text (none: that of an empty file). */
export function textHash(text: string | undefined): string {
  return createHash('sha256')
    .update(text ?? '')
    .digest('hex');
}

/**
 * Sets one top-level key in a YAML config file (or removes it, for `undefined`), keeping its
 * comments and other keys, and replaces the file atomically (a reader never sees it
 * half-written). Mode 0600: it may hold keys.
 */
export function setYamlConfigKey(file: string, key: string, value: unknown): void {
  const document = parseConfigDocument(file, readConfigText(file));
  if (value === undefined) document.delete(key);
  else document.set(key, value);
  writeFileAtomically(file, configDocumentText(document));
}

/** A config file's text as a YAML document, which keeps its comments and order for an edit. */
export function parseConfigDocument(file: string, text: string | undefined): import('yaml').Document.Parsed {
  const document = yaml().parseDocument(text ?? '');
  if (document.errors.length > 0) {
    throw new ClawError('invalid', `cannot read ${file}: ${yamlReason(document.errors[0])}`, { suggestion: 'fix the YAML syntax first' });
  }
  return document;
}

/** A config document as text, its lines as long as the owner wrote them (yaml folds at 80 by default). */
export function configDocumentText(document: import('yaml').Document): string {
  return document.toString({ lineWidth: 0 });
}

/** Replaces a config file whole (a reader never sees it half-written), mode 0600: it may hold keys. */
export function writeFileAtomically(file: string, text: string): void {
  ensureDir(dirname(file));
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, text, { mode: 0o600 });
  renameSync(temp, file);
}

/** yaml's message goes on with a picture of the line under it; an error line takes its first line. */
function yamlReason(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!.replace(/:$/, '');
}
