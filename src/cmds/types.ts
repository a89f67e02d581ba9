/**
 * The nouns of `cmds`: one catalog of everything an agent can run, from three sources — TheClaw's
 * own CLIs (read from their commander definitions), skills (SKILL.md files) and the executables on
 * PATH.
 */

export type EntryKind = 'theclaw' | 'skill' | 'executable';

/** One row of `cmds list` / `cmds find`; its `--json` form is `{name, kind, description, path?}`. */
export interface Entry {
  /** A tool (`thread`), a subcommand path (`notifier timer add`), a skill name or an executable. */
  name: string;
  kind: EntryKind;
  /** One line; may be empty for an executable the system has no description of. */
  description: string;
  /** A skill's SKILL.md or an executable's file; absent for TheClaw commands. */
  path?: string;
  /** An executable whose description comes from the curated table in well-known.ts. */
  curated?: boolean;
}

/** The `--json` shape of an entry (internal fields such as `curated` dropped). */
export interface EntryJson {
  name: string;
  kind: EntryKind;
  description: string;
  path?: string;
}

export interface OptionInfo {
  flags: string;
  description: string;
  /** A mandatory option (`--thread <path>` on most thread commands). */
  required: boolean;
}

export interface ArgumentInfo {
  /** As written in usage: `<path>`, `[name...]`. */
  name: string;
  description: string;
  required: boolean;
}

/** A TheClaw command, read from its commander definition. */
export interface OwnCommand extends Entry {
  kind: 'theclaw';
  /** `thread push --thread <path> [--source <address>] ...` */
  usage: string;
  arguments: ArgumentInfo[];
  options: OptionInfo[];
  examples: string[];
  /** Direct subcommands (a tool or a group such as `notifier timer`). */
  subcommands: { name: string; description: string }[];
}

export interface Skill extends Entry {
  kind: 'skill';
  path: string;
  /** The directory holding SKILL.md. */
  dir: string;
}

export interface Executable extends Entry {
  kind: 'executable';
  path: string;
}

/** What `cmds info` knows about one name. */
export type Info = { kind: 'theclaw'; command: OwnCommand } | { kind: 'skill'; skill: Skill; body: string; truncated: boolean } | { kind: 'executable'; executable: Executable };

/** Where the catalog is read from; every field has a default taken from the environment. */
export interface CatalogOptions {
  /** `$THECLAW_HOME`. Default: resolved from the environment. */
  home?: string;
  /** An agent's directory whose `skills/` is searched. Default: `$THECLAW_AGENT_DIR`. */
  agentDir?: string;
  /** More directories of skills (`--skills-dir`), searched first. */
  skillsDirs?: string[];
  /** The PATH to index. Default: `process.env.PATH`. */
  pathValue?: string;
  /** Receives warnings (a skipped SKILL.md, an unwritable cache). Default: stderr. */
  warn?: (message: string) => void;
}
