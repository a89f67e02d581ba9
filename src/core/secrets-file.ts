import { readFileSync } from 'node:fs';
import { writeFileAtomically } from './config.js';
import { errnoCode, usageError } from './errors.js';
import { secretsEnvPath } from './layout.js';

/**
 * `$THECLAW_HOME/secrets.env`: the provider keys and bot tokens `theclaw setup` keeps, one
 * `NAME=value` per line (systemd's EnvironmentFile format, so the units read it as it is), mode
 * 0600. The daemons get it when they start (notifier's and xgw's start), and so do `theclaw up`
 * and `doctor`; a variable set in the environment wins over the file. Values never go into a
 * YAML file, a log or an argv: they come in on stdin or a hidden prompt.
 */

const LINE = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/;

/** The variables the file holds (none when there is no file). */
export function readSecretsFile(home: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(secretsEnvPath(home), 'utf8');
  } catch (error) {
    // No file, or no home yet (or one that cannot be: doctor says why): nothing stored.
    if (errnoCode(error) === 'ENOENT' || errnoCode(error) === 'ENOTDIR') return {};
    throw error;
  }
  const values: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const match = LINE.exec(line);
    if (!match || line.trimStart().startsWith('#')) continue;
    values[match[1]!] = unquote(match[2]!);
  }
  return values;
}

/** `env` with the file's variables added where `env` has none (the environment wins). */
export function withStoredSecrets(home: string, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...readSecretsFile(home), ...env };
}

/**
 * Sets `name` in the file (replacing its line, keeping the others and the comments), written
 * atomically and 0600. A value with a line break or a quote character would not read back the
 * same through systemd: it is refused.
 */
export function storeSecret(home: string, name: string, value: string): void {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw usageError(`${JSON.stringify(name)} is not a variable name`, 'use letters, digits and _');
  if (value === '' || /[\r\n"'\\]/.test(value) || value !== value.trim()) {
    throw usageError(`the value for ${name} is empty or holds a line break, a quote, a backslash or surrounding spaces`, 'paste the key or token alone, on one line');
  }
  const file = secretsEnvPath(home);
  let lines: string[];
  try {
    lines = readFileSync(file, 'utf8').replace(/\n$/, '').split('\n');
  } catch (error) {
    if (errnoCode(error) !== 'ENOENT') throw error;
    lines = [SECRETS_HEADER];
  }
  const index = lines.findIndex((line) => LINE.exec(line)?.[1] === name && !line.trimStart().startsWith('#'));
  if (index >= 0) lines[index] = `${name}=${value}`;
  else lines.push(`${name}=${value}`);
  writeFileAtomically(file, `${lines.join('\n')}\n`);
}

/** The first line of a new file. */
export const SECRETS_HEADER = '# Provider keys and bot tokens for TheClaw (theclaw setup writes them), one NAME=value per line; a variable set in the environment wins.';

function unquote(value: string): string {
  const quoted = /^(["'])(.*)\1$/.exec(value);
  return quoted ? quoted[2]! : value;
}
