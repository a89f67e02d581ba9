import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parse } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadSkills, parseSkill, readSkillBody, skillRoots } from './skills.js';

let root: string;
let warnings: string[];
const warn = (message: string) => warnings.push(message);

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'cmds-skills-'));
  warnings = [];
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** Writes files from an object literal: path relative to the temp root → content. */
function tree(files: Record<string, string>): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
}

const skillFile = (name: string, description: string, body = '# Body\n') => `---\nname: ${name}\ndescription: ${description}\n---\n${body}`;

describe('parseSkill', () => {
  it('reads name, description (folded to one line) and body', () => {
    const text = '---\nname: github\ndescription: >\n  Interact with GitHub\n  using the `gh` CLI.\nmetadata: { openclaw: { emoji: "🐙" } }\n---\n\n# GitHub\nUse gh.\n';
    expect(parseSkill(text, parse)).toEqual({ name: 'github', description: 'Interact with GitHub using the `gh` CLI.', body: '# GitHub\nUse gh.\n' });
  });

  it('accepts CRLF line ends and a byte-order mark', () => {
    expect(parseSkill('\uFEFF---\r\nname: a\r\ndescription: b\r\n---\r\nbody', parse)).toMatchObject({ name: 'a', description: 'b', body: 'body' });
  });

  it.each([
    ['no front matter', '# Just Markdown\n', /no front matter/],
    ['unclosed front matter', '---\nname: a\ndescription: b\n', /no front matter/],
    ['invalid YAML', '---\nname: [a\ndescription: b\n---\n', /invalid YAML/],
    ['a list, not a mapping', '---\n- a\n---\n', /not a YAML mapping/],
    ['no name', '---\ndescription: b\n---\n', /no "name"/],
    ['an empty description', '---\nname: a\ndescription: ""\n---\n', /no "description"/],
    ['a numeric name', '---\nname: 42\ndescription: b\n---\n', /no "name"/],
  ])('rejects %s', (_case, text, message) => {
    expect(() => parseSkill(text, parse)).toThrow(message);
  });
});

describe('loadSkills', () => {
  it('finds <root>/<dir>/SKILL.md, skips a bad one with a warning, and lets an earlier root win a name', async () => {
    tree({
      'agent/skills/weather/SKILL.md': skillFile('weather', 'agent weather'),
      'home/skills/weather/SKILL.md': skillFile('weather', 'shared weather'),
      'home/skills/github/SKILL.md': skillFile('github', 'GitHub via gh'),
      'home/skills/broken/SKILL.md': '---\nname: broken\n---\n',
      'home/skills/notes/README.md': 'not a skill',
      'home/skills/stray-file': 'x',
    });
    const roots = skillRoots({ home: join(root, 'home'), agentDir: join(root, 'agent') });
    const skills = await loadSkills(roots, warn);
    expect(skills.map((s) => [s.name, s.description])).toEqual([
      ['weather', 'agent weather'],
      ['github', 'GitHub via gh'],
    ]);
    expect(skills[0]).toMatchObject({ kind: 'skill', path: join(root, 'agent/skills/weather/SKILL.md'), dir: join(root, 'agent/skills/weather') });
    expect(warnings).toEqual([expect.stringMatching(/^skipping .*broken\/SKILL\.md: the front matter has no "description"/)]);
  });

  it('orders roots: --skills-dir, then the agent, then the home', () => {
    expect(skillRoots({ home: '/h', agentDir: '/a', skillsDirs: ['/x', '/y', '/x'] })).toEqual(['/x', '/y', '/a/skills', '/h/skills']);
  });

  it('accepts a root that is itself a skill directory', async () => {
    tree({ 'one/SKILL.md': skillFile('one', 'a single skill') });
    expect((await loadSkills([join(root, 'one')], warn)).map((s) => s.name)).toEqual(['one']);
  });

  it('warns about a missing --skills-dir but not about a missing default root', async () => {
    const missing = join(root, 'nope');
    expect(await loadSkills([missing, join(root, 'home/skills')], warn, [missing])).toEqual([]);
    expect(warnings).toEqual([expect.stringContaining(`skills directory ${missing} cannot be read`)]);
  });

  it('bounds a long body at a line break and says it was cut', async () => {
    const body = Array.from({ length: 200 }, (_, i) => `line ${i} of the instructions`).join('\n');
    tree({ 'skills/long/SKILL.md': skillFile('long', 'long one', body) });
    const [skill] = await loadSkills([join(root, 'skills')], warn);
    const read = await readSkillBody(skill!, 1000);
    expect(read.truncated).toBe(true);
    expect(read.body.length).toBeLessThanOrEqual(1000);
    expect(read.body.endsWith('instructions')).toBe(true);
    expect(await readSkillBody(skill!, 100_000)).toEqual({ body, truncated: false });
  });
});
