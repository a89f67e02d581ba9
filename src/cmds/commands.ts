import { printJson } from '../core/cli.js';
import { describeEntry, entryToJson, findEntries, infoToJson, listEntries } from './catalog.js';
import { FIND_BUDGET_BYTES, formatFind, formatInfo, formatList, type TextMode } from './format.js';

/** The CLI's commands: flags in, library call, output out. Errors are thrown to runCli. */

interface Flags {
  json?: boolean;
  skillsDir?: string[];
}

// What reads the output decides its form: a person at a terminal, or an LLM through a pipe.
function textMode(): TextMode {
  return process.stdout.isTTY ? 'text' : 'markdown';
}

export async function find(query: string[], options: Flags & { limit?: number }): Promise<void> {
  const text = query.join(' ');
  const entries = (await findEntries(text, { skillsDirs: options.skillsDir, limit: options.limit })).map((match) => match.entry);
  if (options.json) return printJson(entries.map(entryToJson));
  if (entries.length === 0) {
    process.stderr.write(`no command or skill matches ${JSON.stringify(text)} - try other or fewer words, or cmds list\n`);
    return;
  }
  // The default answer stays under 2 KB; an explicit --limit gets what it asked for.
  process.stdout.write(formatFind(entries, textMode(), { maxBytes: options.limit === undefined ? FIND_BUDGET_BYTES : undefined }));
}

export async function info(name: string[], options: Flags): Promise<void> {
  const result = await describeEntry(name.join(' '), { skillsDirs: options.skillsDir });
  if (options.json) return printJson(infoToJson(result));
  process.stdout.write(formatInfo(result, textMode()));
}

export async function list(options: Flags & { all?: boolean }): Promise<void> {
  const { entries, omittedExecutables } = await listEntries({ skillsDirs: options.skillsDir, all: options.all });
  if (options.json) return printJson(entries.map(entryToJson));
  process.stdout.write(formatList(entries, textMode(), { omittedExecutables }));
}
