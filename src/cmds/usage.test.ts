import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { binNames } from '../core/package.js';
import { referencePath, renderUsage, usagePath } from '../core/usage.js';
import { checkCommandLine } from '../testing/command-line-check.js';
import { indexProgram, THECLAW_PROGRAMS } from './own-commands.js';

// Another HOME and THECLAW_HOME than `npm run usage` had: the reference must not depend on them.
const root = mkdtempSync(join(tmpdir(), 'theclaw-usage-'));
const home = join(root, 'home');
mkdirSync(home);
const env = { ...process.env, HOME: home, THECLAW_HOME: join(root, 'claw') };
afterAll(() => rmSync(root, { recursive: true, force: true }));

function checkedIn(tool: string, path = usagePath(tool)): string {
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}

describe.each(binNames())('%s USAGE.md', (tool) => {
  it('is what the built CLI prints for --help --verbose, which exits 0 and writes nothing', () => {
    const rendered = renderUsage(tool, env); // throws unless the CLI exits 0
    expect(existsSync(env.THECLAW_HOME), 'THECLAW_HOME was created').toBe(false);
    expect(readdirSync(home), 'files were written to HOME').toEqual([]);
    expect(checkedIn(tool), `USAGE.md of ${tool} is stale - run npm run usage`).toBe(rendered);
    expect(checkedIn(tool, referencePath(tool)), `docs/reference/${tool}.md is stale - run npm run usage`).toBe(rendered);
  });

  it('has a section for every command the program defines', async () => {
    const programs = await Promise.all(THECLAW_PROGRAMS.map((factory) => factory()));
    const program = programs.find((candidate) => candidate.name() === tool);
    expect(program, `${tool} has no program in THECLAW_PROGRAMS - add its factory to src/cmds/own-commands.ts`).toBeDefined();
    const headings = new Set(
      checkedIn(tool)
        .match(/^#{1,2} .+$/gm)
        ?.map((line) => line.replace(/^#+ /, '')),
    );
    const missing = indexProgram(program!)
      .map((entry) => entry.name)
      .filter((name) => !headings.has(name));
    expect(missing, `USAGE.md of ${tool} is stale - run npm run usage`).toEqual([]);
  });

  it("has only examples that its program accepts as they are written (they are not run: most need a running system's state)", async () => {
    const programs = await Promise.all(THECLAW_PROGRAMS.map((factory) => factory()));
    const entries = indexProgram(programs.find((candidate) => candidate.name() === tool)!);
    const refused: string[] = [];
    for (const { name, examples } of entries) {
      for (const example of examples) {
        const problem = await checkCommandLine(example);
        if (problem) refused.push(`${name}: ${example}: ${problem}`);
      }
    }
    expect(refused, `examples in src/${tool}/program.ts that the program refuses`).toEqual([]);
  });
});
