import { describe, expect, it } from 'vitest';
import { importedPath, importsOf, sourceFiles } from '../testing/source-imports.js';

/**
 * The tool boundaries, checked on every import under src/ (static, `import type`, `export … from`
 * and dynamic `import()`):
 *
 * - Direction. A tool imports only the tools below it (MAY_IMPORT): core ← thread ← notifier;
 *   core ← pai; core, thread ← xgw; core, thread, pai, xgw, web, browser ← agent; theclaw on top of all. cmds
 *   needs only core: it reads the tools' commands from own-commands.json (below), never their code;
 *   web needs only core; browser needs core and web (its SSRF guard).
 * - Doors. Another tool is reached through its `index.ts`, which exports all that other tools use
 *   of it. Core is the exception: the shared kernel of small, independent modules (errors,
 *   address, logger, sqlite, …), any of which may be imported directly, so that each CLI loads
 *   only the ones it uses (core/index.ts would load better-sqlite3 and commander into all).
 * - Light doors (LIGHT_DOORS). The build bundles per file: a chunk that imports index.ts loads
 *   every module index.ts re-exports (tsup's code splitting keeps them all, even unused). Where a
 *   path that must start fast needs a small part of a tool (agent deliver, on every reply, needs
 *   xgw's client but not its gateway), it imports that module directly; each such module is
 *   named below with the path it keeps fast, and is re-exported by its tool's index.ts as well.
 * - `program.ts` is each tool's command line, and no door: `npm run usage` (scripts/usage.ts)
 *   indexes every tool's commands from their definitions (testing/programs.ts) into the
 *   src/cmds/own-commands.json that cmds reads. A program imports only core
 *   statically (its commands load when an action runs), so building all seven stays cheap.
 * - Entry points (`cli.ts`, notifier's `runner.ts`) are not exempt; they need no exemption.
 * - Tests (`*.test.ts`) are held to the same rules, except that a test reaches into its own tool
 *   freely (it imports the module it tests). A test whose subject spans tools lives in the
 *   highest tool it needs, or in src/e2e.
 * - src/testing and src/e2e are test support: they may import anything, and only tests (and each
 *   other) import them. src/types holds declarations for untyped packages.
 *
 * Imports are read as testing/source-imports.ts reads them; core/cycles.test.ts checks that they
 * run in no circle.
 */

const TOOLS = ['core', 'thread', 'notifier', 'pai', 'cmds', 'web', 'browser', 'xgw', 'agent', 'theclaw'] as const;
type Tool = (typeof TOOLS)[number];

/** The tools each tool may import besides itself. */
const MAY_IMPORT: Record<Tool, readonly Tool[]> = {
  core: [],
  thread: ['core'],
  notifier: ['core', 'thread'],
  pai: ['core'],
  cmds: ['core'],
  web: ['core'],
  browser: ['core', 'web'],
  xgw: ['core', 'thread'],
  agent: ['core', 'thread', 'pai', 'xgw', 'web', 'browser'],
  theclaw: ['core', 'thread', 'notifier', 'pai', 'cmds', 'web', 'browser', 'xgw', 'agent'],
};

/** Modules other tools may import besides index.ts (see above), with the fast path each keeps fast. */
const LIGHT_DOORS: Record<string, string> = {
  'pai/models.ts': "the model configuration, for agent start's window check and theclaw up, without pai's tool loop",
  'xgw/client.ts': 'asking the running gateway, for agent deliver (every reply), without the gateway',
  'xgw/chat-client.ts': 'the terminal chat, for agent send (run in the sandbox) and agent chat, without the gateway',
  'xgw/control.ts': 'starting and reloading the gateway and asking its status, for theclaw up, reload and status',
  'xgw/config.ts': "the gateway's config, for theclaw up",
  'xgw/control-source.ts': "the control page's actions as the browser may send them, for theclaw's control runner, without the gateway",
  'xgw/pairing.ts': "deciding pairing requests, for theclaw's control runner, without the gateway",
  'notifier/control.ts': 'starting and reloading notifier and asking its status, for theclaw up, reload and status',
  'notifier/config.ts': "notifier's config, for theclaw up",
  'web/search-door.ts': "the search a run serves its turns, for every agent run, without web fetch's reader",
  'web/fetch-request.ts': "the fetch requests a run's browser proxy passes on, for every agent run, without the fetch",
  'web/fetch-client.ts': "the name of the turn's service socket, for the browser's client, without the fetch",
  'agent/agent-dir.ts': "an agent's directory and config, for theclaw up, status and prune, without the agent runtime",
  'agent/lifecycle.ts': 'creating, starting and inspecting agents, for theclaw up, status and prune',
  'agent/threads.ts': "the agent's thread store, for theclaw status, prune and the feeds' sweeps, without the agent runtime",
  'agent/placement.ts': "where an agent is placed, for the feeds' sweeps (on admin's host only), without the agent runtime",
  'agent/agent-settings.ts': "an agent's identity, for the control page's runner, without the agent runtime",
  'agent/owner-decisions.ts': "what waits for the owner and deciding it, for the control page's runner, without the agent runtime",
  'agent/identity.ts': 'the system agents, for theclaw up',
  'agent/accounting/usage.ts': 'the usage records, for theclaw status',
  'agent/turn/outage.ts': "an agent's model outage, for theclaw status",
  'agent/damaged-thread.ts': 'describing a damaged thread, for theclaw commands (loaded by every one)',
};

/**
 * The rooms of src/agent, each a subfolder with one concern (its index.ts says which). A room's
 * module reaches another room only through that room's index.ts, and only a room it may use
 * (ROOM_MAY_IMPORT, which has no circle: each room uses only rooms listed before it). The modules
 * at src/agent's top level are the tool's faces (index, cli, program, commands, run) and the
 * vocabulary every room shares (types, agent-dir, router, context, …): a room imports them
 * directly, and they import a room's module directly, so that a fast path loads only what it
 * needs. No module in src/agent is part of an import circle: cycles.test.ts checks all of src/.
 */
const ROOMS = ['memory', 'accounting', 'policy', 'turn', 'delivery', 'conversation', 'proactive'] as const;
type Room = (typeof ROOMS)[number];

/** The rooms each room of src/agent may import besides itself. */
const ROOM_MAY_IMPORT: Record<Room, readonly Room[]> = {
  memory: [],
  accounting: [],
  policy: ['memory', 'accounting'],
  turn: ['memory', 'accounting', 'policy'],
  delivery: ['accounting', 'policy', 'turn'],
  conversation: ['memory', 'accounting', 'policy', 'turn'],
  proactive: ['memory', 'accounting', 'policy', 'turn', 'delivery', 'conversation'],
};

/** The room of src/agent a path lies in (`agent/turn/x.ts`, `src/agent/turn/x.ts`), if any. */
function roomOf(path: string): string | undefined {
  const parts = path.replace(/^src\//, '').split('/');
  return parts[0] === 'agent' && parts.length > 2 ? parts[1] : undefined;
}

/** The imports among `files` that break the rooms of src/agent: one line each, as boundaryViolations. */
function roomViolations(files: ReadonlyMap<string, string>): string[] {
  const found: string[] = [];
  for (const file of files.keys()) {
    const room = roomOf(file);
    if (room !== undefined && !isRoom(room)) found.push(`${file}: src/agent/${room} is no known room - add it to ROOMS and ROOM_MAY_IMPORT in src/core/boundaries.test.ts`);
  }
  for (const { file, line, specifier, target, module } of crossings(files)) {
    const room = roomOf(file);
    const other = roomOf(module);
    if (target !== 'agent' || room === undefined || other === undefined || room === other || file.endsWith('.test.ts') || !isRoom(room)) continue;
    const at = `${file}:${line} imports '${specifier}'`;
    if (!isRoom(other) || !ROOM_MAY_IMPORT[room].includes(other)) {
      found.push(`${at}: the ${room} room may not use ${other} (${room} may use ${ROOM_MAY_IMPORT[room].join(', ') || 'no other room'})`);
    } else if (module !== `agent/${other}/index.ts`) {
      found.push(`${at}: another room's inside - import it from src/agent/${other}/index.ts (export it there)`);
    }
  }
  return found;
}

function isRoom(dir: string): dir is Room {
  return (ROOMS as readonly string[]).includes(dir);
}

const TEST_SUPPORT = ['testing', 'e2e'];
const DECLARATIONS = ['types'];

interface Crossing {
  /** The importing file, `src/<dir>/…`. */
  file: string;
  dir: string;
  line: number;
  specifier: string;
  dynamic: boolean;
  /** The directory under src/ the import lands in, and the module there (`xgw/client.ts`). */
  target: string;
  module: string;
}

/** Every import among `files` (path relative to the repository → source) of a module under src/. */
function crossings(files: ReadonlyMap<string, string>): Crossing[] {
  return [...files].flatMap(([file, source]) =>
    importsOf(source).flatMap(({ specifier, line, dynamic }) => {
      const [top, target, ...rest] = (importedPath(file, specifier) ?? '').split('/');
      if (top !== 'src' || target === undefined) return [];
      return [{ file, dir: file.split('/')[1]!, line, specifier, dynamic, target, module: `${target}/${rest.join('/')}` }];
    }),
  );
}

/**
 * The boundary violations among `files` (path relative to the repository → source): one line
 * each, naming the file, the line, the import and the rule it breaks.
 */
function boundaryViolations(files: ReadonlyMap<string, string>): string[] {
  const found: string[] = [];
  for (const file of files.keys()) {
    const dir = file.split('/')[1]!;
    if (!isTool(dir) && !TEST_SUPPORT.includes(dir) && !DECLARATIONS.includes(dir)) {
      found.push(`${file}: src/${dir} is no known tool - add it to TOOLS and MAY_IMPORT in src/core/boundaries.test.ts`);
    }
    if (isTool(dir) && !file.endsWith('.test.ts')) {
      for (const { specifier, line } of importsOf(files.get(file)!)) {
        if (/^vitest(\/|$)/.test(specifier)) found.push(`${file}:${line} imports '${specifier}': vitest is for tests only`);
      }
    }
  }
  for (const { file, dir, line, specifier, dynamic, target, module } of crossings(files)) {
    if (!isTool(dir)) continue;
    const at = `${file}:${line} imports '${specifier}'`;
    if (file === `src/${dir}/program.ts` && !dynamic && target !== 'core') {
      found.push(`${at}: a program.ts imports only core statically (the usage script and the reference tests build every program) - import it in the action`);
    }
    if (TEST_SUPPORT.includes(target)) {
      if (!file.endsWith('.test.ts')) found.push(`${at}: src/${target} is test support, for tests only`);
      continue;
    }
    if (target === dir || !isTool(target)) continue;
    if (!MAY_IMPORT[dir].includes(target)) {
      found.push(`${at}: ${dir} may not depend on ${target} (${dir} may import ${MAY_IMPORT[dir].join(', ') || 'no other tool'})`);
    } else if (target !== 'core' && module !== `${target}/index.ts` && !(module in LIGHT_DOORS)) {
      found.push(`${at}: another tool's inside - import it from src/${target}/index.ts (export it there)`);
    }
  }
  for (const door of Object.keys(LIGHT_DOORS)) {
    const [tool, ...module] = door.split('/');
    const index = files.get(`src/${tool}/index.ts`);
    const reexported = index !== undefined && importsOf(index).some(({ specifier }) => specifier === `./${module.join('/').replace(/\.ts$/, '.js')}`);
    if (!reexported) found.push(`src/${tool}/index.ts: does not re-export the light door ${door} - export what other tools use of it`);
  }
  return found;
}

/** The light doors that no other tool imports directly: an entry in LIGHT_DOORS that keeps nothing fast. */
function unusedDoors(files: ReadonlyMap<string, string>): string[] {
  const used = new Set(
    crossings(files)
      .filter(({ dir, target }) => dir !== target)
      .map(({ module }) => module),
  );
  return Object.keys(LIGHT_DOORS).filter((door) => !used.has(door));
}

function isTool(dir: string): dir is Tool {
  return (TOOLS as readonly string[]).includes(dir);
}

describe('importsOf', () => {
  it('finds multi-line, type-only, re-exporting and dynamic imports, and nothing in comments or strings', () => {
    const source = [
      'import {',
      '  a,',
      '  type B,',
      "} from './a.js';",
      "import type { C } from '../thread/types.js';",
      "// import { gone } from '../notifier/index.js';",
      "/* import('../pai/chat.js') */",
      'const text = "import x from \'../xgw/index.js\'";',
      "export * from './d.js';",
      "export type { E } from './e.js';",
      'export async function f() {',
      "  return (await import('../agent/program.js')).createAgentProgram();",
      '}',
      "import './side-effect.js';",
    ].join('\n');
    expect(importsOf(source)).toEqual([
      { specifier: './a.js', line: 4, dynamic: false },
      { specifier: '../thread/types.js', line: 5, dynamic: false },
      { specifier: './d.js', line: 9, dynamic: false },
      { specifier: './e.js', line: 10, dynamic: false },
      { specifier: '../agent/program.js', line: 12, dynamic: true },
      { specifier: './side-effect.js', line: 14, dynamic: false },
    ]);
  });
});

describe('boundaryViolations', () => {
  // The real index files, so that the light doors' re-exports are found.
  const indexes = [...sourceFiles()].filter(([path]) => path.endsWith('/index.ts'));
  const check = (file: string, source: string) => boundaryViolations(new Map([...indexes, [file, source]]));

  it('allows a lower tool through its index.ts or a light door, core modules directly, and the own tool freely', () => {
    expect(check('src/agent/x.ts', "import { openThread } from '../thread/index.js';\nimport { a } from '../core/errors.js';\nimport { b } from './run.js';")).toEqual([]);
    expect(check('src/agent/x.ts', "import { askXgw } from '../xgw/client.js';")).toEqual([]);
    expect(check('src/xgw/channels/x.ts', "import { a } from '../../core/errors.js';\nimport { b } from '../state.js';")).toEqual([]);
  });

  it('names the file, the line and the import of each violation', () => {
    expect(check('src/thread/x.ts', "import { a } from './y.js';\nimport { runNotifier } from '../notifier/index.js';")).toEqual([
      "src/thread/x.ts:2 imports '../notifier/index.js': thread may not depend on notifier (thread may import core)",
    ]);
    expect(check('src/agent/x.ts', "const { chat } = await import(\n  '../pai/chat.js'\n);")).toEqual([
      "src/agent/x.ts:2 imports '../pai/chat.js': another tool's inside - import it from src/pai/index.ts (export it there)",
    ]);
    expect(check('src/core/x.ts', "export type { Thread } from '../thread/index.js';")).toEqual([
      "src/core/x.ts:1 imports '../thread/index.js': core may not depend on thread (core may import no other tool)",
    ]);
  });

  it('holds tests to the direction and the doors, but lets them into their own tool and test support', () => {
    expect(check('src/agent/x.test.ts', "import { a } from './run.js';\nimport { b } from '../testing/index.js';\nimport { c } from '../e2e/support.js';")).toEqual([]);
    expect(check('src/agent/x.test.ts', "import { Gateway } from '../xgw/gateway.js';")).toHaveLength(1);
    expect(check('src/core/x.test.ts', "import { indexProgram } from '../cmds/index.js';")).toHaveLength(1);
  });

  it('keeps test support out of the tools', () => {
    expect(check('src/thread/x.ts', "import { waitFor } from '../testing/wait.js';\nimport { it } from 'vitest';")).toHaveLength(2);
    expect(check('src/testing/x.ts', "import { runAgent } from '../agent/run.js';")).toEqual([]);
  });

  it('keeps every program.ts, even from cmds, and has it import only core statically', () => {
    expect(check('src/cmds/x.ts', "const p = () => import('../theclaw/program.js');")).toEqual([
      "src/cmds/x.ts:1 imports '../theclaw/program.js': cmds may not depend on theclaw (cmds may import core)",
    ]);
    expect(check('src/agent/x.ts', "import { createXgwProgram } from '../xgw/program.js';")).toHaveLength(1);
    expect(check('src/xgw/program.ts', "import { a } from '../core/cli.js';\nconst commands = () => import('./commands.js');")).toEqual([]);
    expect(check('src/xgw/program.ts', "import { a } from './commands.js';\nimport { b } from '../thread/index.js';")).toHaveLength(2);
  });

  it('asks for a light door to be re-exported by its index.ts, and for a new directory under src/ to be placed', () => {
    const withoutClient = indexes.map(([path, source]): [string, string] => [path, path === 'src/xgw/index.ts' ? source.replace(/^.*'\.\/client\.js'.*$/m, '') : source]);
    expect(boundaryViolations(new Map(withoutClient))).toEqual(['src/xgw/index.ts: does not re-export the light door xgw/client.ts - export what other tools use of it']);
    expect(check('src/newtool/x.ts', '')).toHaveLength(1);
  });
});

describe('the tool boundaries', () => {
  it('hold for every import under src/', () => {
    const found = boundaryViolations(sourceFiles());
    expect(found, `${found.length} imports cross a tool boundary:\n${found.join('\n')}\n`).toEqual([]);
  });

  it('name only light doors that another tool imports directly', () => {
    expect(unusedDoors(sourceFiles()), 'remove these from LIGHT_DOORS in src/core/boundaries.test.ts').toEqual([]);
  });
});

describe('the rooms of src/agent', () => {
  const check = (file: string, source: string) => roomViolations(new Map([[file, source]]));

  it('lets a room use a room below it through its index.ts, and the top level both ways', () => {
    expect(check('src/agent/turn/x.ts', "import { a } from '../memory/index.js';\nimport { b } from '../types.js';\nimport { c } from './y.js';")).toEqual([]);
    expect(check('src/agent/run.ts', "import { a } from './turn/compaction.js';")).toEqual([]);
  });

  it("names an import of a room above, of another room's inside and of an unknown room", () => {
    expect(check('src/agent/memory/x.ts', "import { a } from '../turn/index.js';")).toEqual([
      "src/agent/memory/x.ts:1 imports '../turn/index.js': the memory room may not use turn (memory may use no other room)",
    ]);
    expect(check('src/agent/turn/x.ts', "import { a } from '../memory/memory-store.js';")).toEqual([
      "src/agent/turn/x.ts:1 imports '../memory/memory-store.js': another room's inside - import it from src/agent/memory/index.ts (export it there)",
    ]);
    expect(check('src/agent/attic/x.ts', '')).toHaveLength(1);
  });

  it('list in ROOM_MAY_IMPORT only rooms listed before, so that the rooms have no circle', () => {
    for (const [at, room] of ROOMS.entries())
      expect(
        ROOM_MAY_IMPORT[room].every((other) => ROOMS.indexOf(other) < at),
        room,
      ).toBe(true);
  });

  it('hold for every import in src/agent', () => {
    const files = sourceFiles();
    const found = roomViolations(files);
    expect(found, `${found.length} imports break the rooms:\n${found.join('\n')}\n`).toEqual([]);
  });
});
