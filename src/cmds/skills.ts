import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { preloadYaml, yaml } from '../core/config.js';
import { errnoCode } from '../core/errors.js';
import { sharedSkillsDir } from '../core/layout.js';
import type { Skill } from './types.js';

/**
 * Skills in OpenClaw's format: a directory holding a SKILL.md that starts with YAML front matter
 * carrying `name` and `description`, followed by Markdown instructions. They are read fresh on every
 * call, so a skill dropped into a directory is found by the next `cmds find`.
 */

export interface SkillRootsOptions {
  home: string;
  /** An agent's directory (`$THECLAW_AGENT_DIR`); its `skills/` is searched. */
  agentDir?: string;
  /** Extra skill directories (`--skills-dir`). */
  skillsDirs?: readonly string[];
}

/**
 * Where skills are looked for, in precedence order: `--skills-dir` first, then the agent's own
 * `skills/`, then `$THECLAW_HOME/skills/`. A name found in an earlier root hides later ones, so
 * an agent can override a shared skill.
 */
export function skillRoots(options: SkillRootsOptions): string[] {
  const roots = (options.skillsDirs ?? []).map((dir) => resolve(dir));
  if (options.agentDir) roots.push(join(resolve(options.agentDir), 'skills'));
  roots.push(sharedSkillsDir(options.home));
  return [...new Set(roots)];
}

export interface ParsedSkill {
  name: string;
  description: string;
  /** The Markdown after the front matter. */
  body: string;
}

type YamlParse = (text: string) => unknown;

const FRONT_MATTER = /^\uFEFF?---[ \t]*\r?\n(?:([\s\S]*?)\r?\n)?---[ \t]*(?:\r?\n|$)/;

/** Parses a SKILL.md; throws an Error whose message says what is wrong with it. */
export function parseSkill(text: string, parseYaml: YamlParse): ParsedSkill {
  const match = FRONT_MATTER.exec(text);
  if (!match) throw new Error('no front matter (the file must start with a --- line, then name: and description:, then ---)');
  let data: unknown;
  try {
    data = parseYaml(match[1] ?? '');
  } catch (error) {
    throw new Error(`invalid YAML front matter: ${firstLine(error instanceof Error ? error.message : String(error))}`);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw new Error('the front matter is not a YAML mapping');
  const { name, description } = data as { name?: unknown; description?: unknown };
  if (typeof name !== 'string' || name.trim() === '') throw new Error('the front matter has no "name" string');
  if (typeof description !== 'string' || description.trim() === '') throw new Error('the front matter has no "description" string');
  return {
    name: name.trim(),
    description: description.replace(/\s+/g, ' ').trim(),
    body: text.slice(match[0].length).replace(/^\s*\n/, ''),
  };
}

/**
 * Every valid skill under `roots`: `<root>/<dir>/SKILL.md`, or `<root>/SKILL.md` when a root is
 * itself a skill. A SKILL.md that cannot be parsed is skipped with a warning. Roots that do not
 * exist are skipped silently unless listed in `explicit` (`--skills-dir`).
 */
export async function loadSkills(roots: readonly string[], warn: (message: string) => void, explicit: readonly string[] = []): Promise<Skill[]> {
  const mustExist = new Set(explicit.map((dir) => resolve(dir)));
  const files: string[] = [];
  for (const root of roots) {
    const own = join(root, 'SKILL.md');
    if (isFile(own)) files.push(own);
    let names: string[];
    try {
      names = readdirSync(root).sort();
    } catch (error) {
      if (mustExist.has(root)) warn(`skills directory ${root} cannot be read (${errnoCode(error) ?? 'error'})`);
      continue;
    }
    for (const name of names) {
      const file = join(root, name, 'SKILL.md');
      if (isFile(file)) files.push(file);
    }
  }
  if (files.length === 0) return [];

  // yaml costs ~10 ms to load, so only when there is a skill to read.
  await preloadYaml();
  const { parse } = yaml();
  const skills = new Map<string, Skill>();
  for (const file of files) {
    let parsed: ParsedSkill;
    try {
      parsed = parseSkill(readFileSync(file, 'utf8'), parse);
    } catch (error) {
      warn(`skipping ${file}: ${error instanceof Error ? error.message : String(error)}`);
      continue;
    }
    if (skills.has(parsed.name)) continue;
    skills.set(parsed.name, { name: parsed.name, kind: 'skill', description: parsed.description, path: file, dir: join(file, '..') });
  }
  return [...skills.values()];
}

/** The Markdown body of a skill's SKILL.md, cut to `maxChars` at a line break where possible. */
export async function readSkillBody(skill: Skill, maxChars: number): Promise<{ body: string; truncated: boolean }> {
  await preloadYaml();
  const { parse } = yaml();
  const { body } = parseSkill(readFileSync(skill.path, 'utf8'), parse);
  if (body.length <= maxChars) return { body, truncated: false };
  const cut = body.slice(0, maxChars);
  const lastBreak = cut.lastIndexOf('\n');
  return { body: lastBreak > maxChars / 2 ? cut.slice(0, lastBreak) : cut, truncated: true };
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0] ?? '';
}
