import { printJson } from '../core/cli.js';
import { preloadYaml } from '../core/config.js';
import { resolveHome } from '../core/home.js';
import { fetchPage } from './fetch.js';
import { fetchOutput, formatResults } from './format.js';
import { searchFromHere } from './search-door.js';

/** The CLI's commands: flags in, library call, output out. Errors are thrown to runCli. */

interface FetchFlags {
  maxChars?: number;
  raw?: boolean;
  fresh?: boolean;
  timeout?: number;
  maxBytes?: number;
  json?: boolean;
}

export async function fetch(url: string, flags: FetchFlags): Promise<void> {
  await preloadYaml(); // web/config.yaml is read on the way
  const page = await fetchPage(
    url,
    { maxChars: flags.maxChars, raw: flags.raw, fresh: flags.fresh, timeoutSeconds: flags.timeout, maxBytes: flags.maxBytes },
    { home: resolveHome(), env: process.env },
  );
  process.stdout.write(fetchOutput(page, flags));
}

export async function search(query: string[], flags: { count?: number; json?: boolean }): Promise<void> {
  await preloadYaml();
  const text = query.join(' ');
  const results = await searchFromHere(text, { count: flags.count }, { home: resolveHome(), env: process.env });
  if (flags.json) return printJson(results);
  process.stdout.write(formatResults(text, results));
}
