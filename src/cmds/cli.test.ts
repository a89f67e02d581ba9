import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, runTool, type RunResult, type TestHome } from '../testing/index.js';

// The real `cmds` CLI in a temp THECLAW_HOME, on this machine's PATH. Output is piped here, so
// the text form is Markdown, as an agent sees it through bash_exec.

let t: TestHome;

beforeEach(() => {
  t = createTestHome();
});
afterEach(() => t.cleanup());

function cmds(args: string[], env: NodeJS.ProcessEnv = t.env): Promise<RunResult> {
  return runTool('cmds', args, env);
}

async function ok(args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
  const result = await cmds(args, env);
  expect(result, `cmds ${args.join(' ')}`).toMatchObject({ code: 0, stderr: '' });
  return result.stdout;
}

/** The names in a Markdown answer, in order. */
function names(markdown: string): string[] {
  return markdown.split('\n').flatMap((line) => /^- `([^`]+)`/.exec(line)?.[1] ?? []);
}

function writeSkill(dir: string, name: string, description: string, body = `# ${name}\nDo the thing.\n`): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'SKILL.md');
  writeFileSync(file, `---\nname: ${name}\ndescription: ${description}\n---\n${body}`);
  return file;
}

describe('cmds find', () => {
  it('ranks ls in the top 3 for "list files"', async () => {
    const found = names(await ok(['find', 'list files']));
    expect(found.slice(0, 3)).toContain('ls');
  });

  it('ranks the thread tool first for "thread", and a subcommand path first when named', async () => {
    expect(names(await ok(['find', 'thread']))[0]).toBe('thread');
    expect(names(await ok(['find', 'thread', 'push']))[0]).toBe('thread push');
    expect(names(await ok(['find', 'notifier timer add']))[0]).toBe('notifier timer add');
  });

  it('answers in under 2 KB when piped, with at most 8 results by default', async () => {
    for (const query of ['a', 'file', 'list files', 'thread', 'x', 'the']) {
      const out = await ok(['find', query]);
      expect(Buffer.byteLength(out), query).toBeLessThan(2048);
      expect(names(out).length, query).toBeLessThanOrEqual(8);
      for (const line of out.split('\n')) expect(line.length).toBeLessThan(200);
    }
  });

  it('honours --limit', async () => {
    expect(names(await ok(['find', 'file', '--limit', '3']))).toHaveLength(3);
    expect(JSON.parse(await ok(['find', 'file', '--limit', '20', '--json']))).toHaveLength(20);
  });

  it('prints {name, kind, description, path?} objects with --json', async () => {
    const found = JSON.parse(await ok(['find', 'list files', '--json'])) as Record<string, unknown>[];
    expect(found.length).toBeGreaterThan(0);
    for (const entry of found) {
      expect(Object.keys(entry).sort()).toEqual(entry.kind === 'theclaw' ? ['description', 'kind', 'name'] : ['description', 'kind', 'name', 'path']);
      expect(['theclaw', 'skill', 'executable']).toContain(entry.kind);
    }
    expect(found.find((e) => e.name === 'ls')).toMatchObject({ kind: 'executable', description: expect.stringContaining('list files') });
  });

  it('is a usage error (exit 2) with an empty query', async () => {
    for (const args of [['find', ''], ['find', '  '], ['find']]) {
      const result = await cmds(args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^Error: .+ - .+\n$/);
    }
    expect(JSON.parse((await cmds(['find', '', '--json'])).stdout)).toEqual({ error: 'the query is empty', suggestion: expect.any(String) });
  });

  it('says so on stderr when nothing matches, exiting 0', async () => {
    const result = await cmds(['find', 'qqqzzzxxxwww']);
    expect(result).toMatchObject({ code: 0, stdout: '' });
    expect(result.stderr).toMatch(/no command or skill matches/);
    expect(await ok(['find', 'qqqzzzxxxwww', '--json'])).toBe('[]\n');
  });

  it('keeps the PATH index in THECLAW_HOME/cmds', async () => {
    await ok(['find', 'x']);
    expect(existsSync(join(t.home, 'cmds', 'path-index.json'))).toBe(true);
  });
});

describe('skills', () => {
  it('finds a skill dropped into THECLAW_HOME/skills on the next call, and lists it', async () => {
    expect(names((await cmds(['find', 'weather forecast'])).stdout)).not.toContain('weather');
    const file = writeSkill(join(t.home, 'skills', 'weather'), 'weather', 'Get the current weather and forecasts for a city');
    const out = await ok(['find', 'weather forecast']);
    expect(names(out)[0]).toBe('weather');
    expect(out).toContain('- `weather` (skill) — Get the current weather');
    expect(names(await ok(['list']))).toContain('weather');
    const listed = JSON.parse(await ok(['list', '--json'])) as { name: string }[];
    expect(listed.find((e) => e.name === 'weather')).toEqual({ name: 'weather', kind: 'skill', description: 'Get the current weather and forecasts for a city', path: file });
  });

  it("finds an agent's own skills when THECLAW_AGENT_DIR is set", async () => {
    const agentDir = join(t.home, 'agents', 'admin');
    writeSkill(join(agentDir, 'skills', 'backup'), 'nightly-backup', 'Back up the workdir to a tarball every night');
    expect(names(await ok(['find', 'nightly-backup']))).not.toContain('nightly-backup');
    expect(names(await ok(['find', 'nightly-backup'], { ...t.env, THECLAW_AGENT_DIR: agentDir }))[0]).toBe('nightly-backup');
  });

  it('reads --skills-dir, repeatable', async () => {
    writeSkill(join(t.home, 'x', 'one'), 'skill-one', 'first extra skill');
    writeSkill(join(t.home, 'y', 'two'), 'skill-two', 'second extra skill');
    const found = names(await ok(['find', 'extra skill', '--skills-dir', join(t.home, 'x'), '--skills-dir', join(t.home, 'y')]));
    expect(found.slice(0, 2).sort()).toEqual(['skill-one', 'skill-two']);
  });

  it('skips a SKILL.md with bad front matter with a warning, not a crash', async () => {
    mkdirSync(join(t.home, 'skills', 'broken'), { recursive: true });
    writeFileSync(join(t.home, 'skills', 'broken', 'SKILL.md'), '---\nname: [unclosed\n---\n');
    writeSkill(join(t.home, 'skills', 'good'), 'good-skill', 'a skill that parses');
    const result = await cmds(['find', 'good-skill']);
    expect(result.code).toBe(0);
    expect(names(result.stdout)[0]).toBe('good-skill');
    expect(result.stderr).toMatch(/^warning: skipping .*broken\/SKILL\.md: invalid YAML front matter/);
  });

  it('shows a skill with cmds info: its path and its instructions', async () => {
    const file = writeSkill(join(t.home, 'skills', 'weather'), 'weather', 'Get the weather', '# Weather\n\nRun `curl wttr.in/Paris?format=3`.\n');
    const out = await ok(['info', 'weather']);
    expect(out).toContain(`Path: ${file}`);
    expect(out).toContain('Run `curl wttr.in/Paris?format=3`.');
    expect(JSON.parse(await ok(['info', 'weather', '--json']))).toEqual({
      name: 'weather',
      kind: 'skill',
      description: 'Get the weather',
      path: file,
      body: '# Weather\n\nRun `curl wttr.in/Paris?format=3`.\n',
      truncated: false,
    });
  });
});

describe('cmds info', () => {
  it('shows thread push with its usage, --idempotency-key and an example, in under 2 KB', async () => {
    const out = await ok(['info', 'thread', 'push']);
    expect(out).toContain('Usage: `thread push --thread <path>');
    expect(out).toContain('--idempotency-key <key>');
    expect(out).toMatch(/```sh\nthread push --thread /);
    expect(Buffer.byteLength(out)).toBeLessThan(2048);
    expect(await ok(['info', 'thread push'])).toBe(out);
  });

  it('gives the details as JSON', async () => {
    const info = JSON.parse(await ok(['info', 'notifier', 'timer', 'add', '--json']));
    expect(Object.keys(info).sort()).toEqual(['arguments', 'description', 'examples', 'kind', 'name', 'options', 'subcommands', 'usage']);
    expect(info).toMatchObject({ name: 'notifier timer add', kind: 'theclaw', examples: expect.arrayContaining([expect.stringMatching(/^notifier timer add /)]) });
    expect(info.options).toContainEqual({ flags: '--id <id>', description: expect.any(String), required: true });
  });

  it('shows an executable on PATH', async () => {
    const out = await ok(['info', 'ls']);
    expect(out).toMatch(/^# ls \(executable\)\nlist files and directories/);
    expect(out).toMatch(/\nPath: \/.*\/ls\n/);
  });

  it('indexes itself', async () => {
    expect(await ok(['info', 'cmds', 'find'])).toContain('cmds find "list files"');
  });

  it('exits 1 for an unknown name, suggesting cmds find', async () => {
    const result = await cmds(['info', 'no-such-thing']);
    expect(result).toEqual({ code: 1, stdout: '', stderr: 'Error: no command or skill named no-such-thing - try: cmds find no-such-thing\n' });
    const json = await cmds(['info', 'thread', 'pusj', '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({ error: 'no command or skill named thread pusj', suggestion: 'try: cmds find "thread pusj"' });
  });
});

describe('cmds list and --help', () => {
  it('lists TheClaw commands, skills and the everyday executables, and counts the rest', async () => {
    const out = await ok(['list']);
    expect(out).toMatch(/^## TheClaw commands\n- `thread` — /);
    expect(names(out)).toEqual(expect.arrayContaining(['thread push', 'notifier timer add', 'cmds find', 'ls', 'grep']));
    expect(out).toMatch(/\(\d+ more executables on PATH/);
    const all = JSON.parse(await ok(['list', '--all', '--json'])) as { name: string }[];
    const some = JSON.parse(await ok(['list', '--json'])) as { name: string }[];
    expect(all.length).toBeGreaterThan(some.length);
  });

  it('teaches with examples under --help', async () => {
    const help = await ok(['--help']);
    expect(help).toContain('Examples:\n  cmds find "list files"');
    expect(await ok(['find', '--help'])).toContain('Examples:');
  });

  it('is a usage error for an unknown flag', async () => {
    const result = await cmds(['list', '--bogus']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^Error: unknown option '--bogus' - see 'cmds list --help'\n$/);
  });

  it("says what was meant on the error's one line, not after a \\n", async () => {
    const result = await cmds(['list', '--jsn']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe("Error: unknown option '--jsn' (Did you mean --json?) - see 'cmds list --help'\n");
  });
});
