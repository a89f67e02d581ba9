import { ClawError, usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { loadOwnCommands } from './own-commands.js';
import { loadPathIndex, type DescriptionReader } from './path.js';
import { normalizeQuery, rankEntries, type Match } from './rank.js';
import { loadSkills, readSkillBody, skillRoots } from './skills.js';
import type { CatalogOptions, Entry, EntryJson, Executable, Info, OwnCommand, Skill } from './types.js';

/**
 * The library behind the `cmds` CLI: everything an agent can run, from TheClaw's own command
 * definitions, skill directories and PATH, read fresh on each call (PATH through its cache).
 */

/** Seams for tests; the CLI uses the defaults. */
export interface CatalogSeams {
  /** Default: apropos. */
  readDescriptions?: DescriptionReader;
}

export type LoadOptions = CatalogOptions & CatalogSeams;

export interface Catalog {
  own: OwnCommand[];
  skills: Skill[];
  /** Executables on PATH, except those named like a TheClaw tool (the tool's entry covers them). */
  executables: Executable[];
}

interface Resolved {
  home: string;
  warn: (message: string) => void;
}

function resolveOptions(options: CatalogOptions): Resolved {
  return {
    home: options.home ?? resolveHome(),
    warn: options.warn ?? ((message) => process.stderr.write(`warning: ${message}\n`)),
  };
}

async function readSkills(options: LoadOptions, { home, warn }: Resolved): Promise<Skill[]> {
  const agentDir = options.agentDir ?? (process.env.THECLAW_AGENT_DIR || undefined);
  const roots = skillRoots({ home, agentDir, skillsDirs: options.skillsDirs });
  return loadSkills(roots, warn, options.skillsDirs);
}

function readExecutables(options: LoadOptions, { home, warn }: Resolved, own: readonly OwnCommand[]): Executable[] {
  const tools = new Set(own.filter((command) => !command.name.includes(' ')).map((command) => command.name));
  const executables = loadPathIndex({ home, pathValue: options.pathValue ?? process.env.PATH ?? '', warn, readDescriptions: options.readDescriptions });
  return executables.filter((executable) => !tools.has(executable.name));
}

export async function loadCatalog(options: LoadOptions = {}): Promise<Catalog> {
  const resolved = resolveOptions(options);
  const own = loadOwnCommands();
  const skills = await readSkills(options, resolved);
  return { own, skills, executables: readExecutables(options, resolved, own) };
}

export function catalogEntries(catalog: Catalog): Entry[] {
  return [...catalog.own, ...catalog.skills, ...catalog.executables];
}

export interface FindOptions extends LoadOptions {
  /** Most results. Default: 8. */
  limit?: number;
}

export const DEFAULT_FIND_LIMIT = 8;

/** The entries best matching `query` (ranking in rank.ts). An empty query is a usage error. */
export async function findEntries(query: string, options: FindOptions = {}): Promise<Match[]> {
  if (normalizeQuery(query) === '') {
    throw usageError('the query is empty', `say what you want to do, e.g. cmds find "list files"`);
  }
  const catalog = await loadCatalog(options);
  return rankEntries(catalogEntries(catalog), query).slice(0, options.limit ?? DEFAULT_FIND_LIMIT);
}

export interface ListOptions extends LoadOptions {
  /** Every executable on PATH, not only the curated ones. Default: false. */
  all?: boolean;
}

export interface ListResult {
  entries: Entry[];
  /** Executables on PATH left out (without `all`). */
  omittedExecutables: number;
}

/**
 * TheClaw commands and skills, then executables: by default only the curated ones (an agent's
 * everyday commands), since a full PATH is thousands of lines; `all` lists every one.
 */
export async function listEntries(options: ListOptions = {}): Promise<ListResult> {
  const catalog = await loadCatalog(options);
  const executables = options.all ? catalog.executables : catalog.executables.filter((executable) => executable.curated);
  return {
    entries: [...catalog.own, ...[...catalog.skills].sort(byName), ...[...executables].sort(byName)],
    omittedExecutables: catalog.executables.length - executables.length,
  };
}

function byName(a: Entry, b: Entry): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** Longest SKILL.md body `info` prints; the rest is a `cat` away. */
export const SKILL_BODY_LIMIT = 3000;

/**
 * What one name is: a TheClaw command (`thread push`), else a skill, else an executable on PATH.
 * Names match case-insensitively, inner whitespace collapsed.
 */
export async function describeEntry(name: string, options: LoadOptions = {}): Promise<Info> {
  const wanted = normalizeQuery(name);
  if (wanted === '') throw usageError('no name given', 'pass a command, subcommand or skill name, e.g. cmds info thread push');
  const resolved = resolveOptions(options);
  const own = loadOwnCommands();
  const command = own.find((entry) => entry.name.toLowerCase() === wanted);
  if (command) return { kind: 'theclaw', command };
  const skill = (await readSkills(options, resolved)).find((entry) => entry.name.toLowerCase() === wanted);
  if (skill) return { kind: 'skill', skill, ...(await readSkillBody(skill, SKILL_BODY_LIMIT)) };
  const executables = readExecutables(options, resolved, own);
  const executable = executables.find((entry) => entry.name === name.trim()) ?? executables.find((entry) => entry.name.toLowerCase() === wanted);
  if (executable) return { kind: 'executable', executable };
  const shown = name.trim().replace(/\s+/g, ' ');
  throw new ClawError('not_found', `no command or skill named ${shown}`, {
    suggestion: `try: cmds find ${/\s/.test(shown) ? JSON.stringify(shown) : shown}`,
  });
}

/** The `--json` form of an entry: `{name, kind, description, path?}`. */
export function entryToJson(entry: Entry): EntryJson {
  return entry.path === undefined ? { name: entry.name, kind: entry.kind, description: entry.description } : { name: entry.name, kind: entry.kind, description: entry.description, path: entry.path };
}

/** The `--json` form of `cmds info`. */
export function infoToJson(info: Info): object {
  switch (info.kind) {
    case 'theclaw': {
      const { name, kind, description, usage, arguments: args, options, examples, subcommands } = info.command;
      return { name, kind, description, usage, arguments: args, options, examples, subcommands };
    }
    case 'skill':
      return { ...entryToJson(info.skill), body: info.body, truncated: info.truncated };
    case 'executable':
      return entryToJson(info.executable);
    default: {
      const never: never = info;
      return never;
    }
  }
}
