import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentDir, loadAgentConfig } from '../agent/index.js';
import { ensureDir } from '../core/home.js';
import { packageRoot } from '../core/package.js';
import { loadConfig as loadNotifierConfig } from '../notifier/index.js';
import { loadPaiConfig } from '../pai/index.js';
import { loadXgwConfig } from '../xgw/index.js';
import { loadWebConfig } from '../web/index.js';
import { startFakeOpenAI, type FakeLlmServer } from '../testing/fake-llm.js';
import { startFakeTelegram, type FakeTelegram } from '../testing/fake-telegram.js';
import { checkCommandLine } from '../testing/command-line-check.js';
import { createTestHome, type TestHome } from '../testing/index.js';
import { type ExampleBlock, type ExampleCommand, extractExamples } from '../testing/readme-examples.js';

/**
 * A README example that fails as written is a failing test. Every command of every `sh` block of
 * README.md and of the guide's chapters (docs/guide/*.md) runs as a reader would type it, against
 * the built tools (dist/) on PATH: the blocks of one section in order, in one THECLAW_HOME of their own (an `export` or `cd` holds for the
 * commands after it), the sections side by side. A command passes when it exits 0 within
 * COMMAND_TIMEOUT_MS. What a block cannot do here is marked in its document (see
 * src/testing/readme-examples.ts) and counted, never run; a marked command of TheClaw's tools must
 * still be one its program accepts. Every `yaml` block must be a config that a tool's loader accepts
 * as written: pai's, notifier's, xgw's or an agent's (a part of one, such as a policy, given the
 * agent_id every agent config has).
 *
 * The reader has an OpenAI key and a Telegram bot, both on loopback: OPENAI_API_KEY is set and
 * pai's config points the openai provider at the fake OpenAI server, TELEGRAM_BOT_TOKEN is the fake
 * Telegram's and xgw's config has a `telegram:main` channel on it (with the web chat on a free port,
 * so that no test run collides with another on 18790).
 */

/** The documents whose examples run, relative to the package root: the README, then the guide in order. */
const DOCUMENTS = [
  'README.md',
  ...readdirSync(join(packageRoot(), 'docs', 'guide'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/guide/${name}`),
];
/** For a command that hangs, not a slow one: the sections run side by side, and 20 s was missed on a loaded machine. */
const COMMAND_TIMEOUT_MS = 60_000;

/**
 * What a section's examples take for granted, done in its home before them: a section that talks to
 * the running system assumes the quick start's `theclaw up`. Keyed by sectionKey.
 */
const GIVEN: Record<string, string[]> = {
  'docs/guide/03-agents.md: `agent` — the agent runtime': ['theclaw up'],
  'docs/guide/03-agents.md: Heartbeats': ['theclaw up'],
  'docs/guide/03-agents.md: One person across channels': ['agent init admin'],
};

/** An example block with the document it is in. */
interface DocumentBlock extends ExampleBlock {
  file: string;
}

interface Outcome {
  command: ExampleCommand;
  code: number | null;
  timedOut: boolean;
  ms: number;
  stdout: string;
  stderr: string;
}

const examples: DocumentBlock[] = DOCUMENTS.flatMap((file) => extractExamples(readFileSync(join(packageRoot(), file), 'utf8')).map((block) => ({ ...block, file })));
const blocks = examples.filter((block) => block.language === 'shell');
const configs = examples.filter((block) => block.language === 'yaml');
/** A section is a heading of one document: two documents may have headings alike. */
const sectionKey = (block: DocumentBlock) => `${block.file}: ${block.section}`;
const sections = new Map<string, DocumentBlock[]>();
for (const block of blocks) sections.set(sectionKey(block), [...(sections.get(sectionKey(block)) ?? []), block]);
const counts = { ran: 0, configs: 0, notRun: [] as string[] };

let llm: FakeLlmServer;
let telegram: FakeTelegram;

beforeAll(async () => {
  [llm, telegram] = await Promise.all([startFakeOpenAI(), startFakeTelegram()]);
});

afterAll(async () => {
  await Promise.all([llm?.close(), telegram?.close()]);
  console.log(
    `README examples: ${counts.ran} commands ran, ${counts.configs} configs were accepted, ${counts.notRun.length} marked not run${counts.notRun.length ? `:\n  ${counts.notRun.join('\n  ')}` : ''}`,
  );
});

describe.concurrent('README examples', () => {
  it('has examples, and a section for each that GIVEN prepares', () => {
    expect(blocks.length).toBeGreaterThan(0);
    for (const section of Object.keys(GIVEN)) expect([...sections.keys()], `GIVEN names the section "${section}"`).toContain(section);
  });

  it('has yaml examples, each a config that a tool accepts as written', () => {
    expect(configs.length).toBeGreaterThan(0);
    const failures: string[] = [];
    for (const block of configs) {
      const [example] = block.commands;
      if (example!.notRun) {
        counts.notRun.push(`${block.file}:${block.line} yaml (${example!.notRun})`);
        continue;
      }
      counts.configs++;
      const problems = configProblems(example!.text);
      if (problems) failures.push(`${where(block, block.line)}: the yaml block is no config that a tool accepts:\n  ${problems.join('\n  ')}`);
    }
    if (failures.length > 0) throw new Error(`${failures.length} config example(s) are refused as written:\n\n${failures.join('\n\n')}`);
  });

  for (const [section, sectionBlocks] of sections) {
    it(`${sectionBlocks[0]!.section} (${sectionBlocks[0]!.file}:${sectionBlocks[0]!.line})`, { timeout: 120_000 }, async () => {
      const failures = await runSection(section, sectionBlocks);
      if (failures.length > 0) throw new Error(`${failures.length} example(s) failed as written:\n\n${failures.join('\n\n')}`);
    });
  }
});

/** Runs a section's examples in a home of their own; returns a description of each command that failed. */
async function runSection(section: string, sectionBlocks: DocumentBlock[]): Promise<string[]> {
  const home = readerHome();
  const failures: string[] = [];
  const run = (text: string) => runCommand(home, { line: 0, text });
  try {
    for (const text of GIVEN[section] ?? []) {
      const given = await run(text);
      if (given.code !== 0) return [`${where(sectionBlocks[0]!, sectionBlocks[0]!.line)}: what the section takes for granted failed: ${describeOutcome(given)}`];
    }
    for (const block of sectionBlocks) {
      for (const command of block.commands) {
        if (command.notRun) {
          counts.notRun.push(`${block.file}:${command.line} ${firstLine(command.text)} (${command.notRun})`);
          const problem = await checkCommandLine(command.text);
          if (problem) failures.push(`${where(block, command.line)}: \`${command.text}\` (not run) is refused by its program: ${problem}`);
          continue;
        }
        const outcome = await runCommand(home, command);
        counts.ran++;
        if (outcome.code !== 0 || outcome.timedOut) failures.push(`${where(block, command.line)}: ${describeOutcome(outcome)}`);
      }
    }
    return failures;
  } finally {
    await run('theclaw down');
    home.cleanup();
  }
}

/** A THECLAW_HOME as the reader's: the keys and configs of the module comment, and a HOME of their own to work in. */
function readerHome(): TestHome & { cwd: string } {
  const home = createTestHome();
  for (const name of Object.keys(home.env)) if (/_API_KEY$|_BOT_TOKEN$|^THECLAW_(?!HOME$)/.test(name)) delete home.env[name];
  Object.assign(home.env, { OPENAI_API_KEY: 'sk-readme-examples', TELEGRAM_BOT_TOKEN: telegram.token });
  const write = (file: string, text: string) => {
    ensureDir(join(home.home, file, '..'));
    writeFileSync(join(home.home, file), text);
  };
  write('pai/config.yaml', `providers:\n  openai: { api: openai-completions, base_url: "${llm.url}" }\n`);
  write(
    'xgw/config.yaml',
    `channels:
  - { id: webchat:main, type: webchat, port: 0, access: open }
  - { id: terminal:local, type: terminal, access: open }
  - { id: telegram:main, type: telegram, token_env: TELEGRAM_BOT_TOKEN, api_root: "${telegram.apiRoot}" }
routes:
  - { channel: "*", peer: "*", agent: admin }
`,
  );
  // The reader's own home directory, where the examples start: nothing they write reaches the real one.
  const cwd = join(home.home, '.reader');
  mkdirSync(cwd);
  home.env.HOME = cwd;
  return { ...home, cwd };
}

/**
 * Runs one command with bash in the section's working directory, its output into files (a daemon it
 * starts may keep them open), killed with its process group past the timeout; what it left in its
 * group is killed when it ends (a daemon leaves the group). The environment and working directory
 * it leaves are the next command's.
 */
async function runCommand(home: TestHome & { cwd: string }, command: ExampleCommand): Promise<Outcome> {
  const state = join(home.home, '.shell-state');
  const script = `[ -f '${state}' ] && . '${state}' && cd "$EXAMPLE_CWD"
trap 'export -p > "${state}"; echo "export EXAMPLE_CWD=$(printf %q "$PWD")" >> "${state}"' EXIT
${command.text}`;
  const files = { stdout: join(home.home, '.stdout'), stderr: join(home.home, '.stderr') };
  const fds = [openSync(files.stdout, 'w'), openSync(files.stderr, 'w')];
  const started = Date.now();
  try {
    const child = spawn('bash', ['-c', script], { cwd: home.cwd, env: home.env, stdio: ['ignore', fds[0], fds[1]], detached: true });
    let timedOut = false;
    const killGroup = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // ESRCH: nothing is left in it
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, COMMAND_TIMEOUT_MS);
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('exit', (exitCode) => resolve(exitCode));
    }).finally(() => {
      clearTimeout(timer);
      killGroup();
    });
    return { command, code, timedOut, ms: Date.now() - started, stdout: readFileSync(files.stdout, 'utf8'), stderr: readFileSync(files.stderr, 'utf8') };
  } finally {
    for (const fd of fds) closeSync(fd);
  }
}

/** Where each tool reads its config in a home, with the loader that makes every check the tool makes on reading it. */
const CONFIG_FILES: { file: string; load(home: string): unknown }[] = [
  { file: 'pai/config.yaml', load: loadPaiConfig },
  { file: 'notifier/config.yaml', load: loadNotifierConfig },
  { file: 'xgw/config.yaml', load: loadXgwConfig },
  { file: 'agents/helper/config.yaml', load: (home) => loadAgentConfig(agentDir(home, 'helper')) },
  { file: 'web/config.yaml', load: loadWebConfig },
];

/** `undefined` when one of the tools accepts `text` as its config; otherwise what each says. */
function configProblems(text: string): string[] | undefined {
  const home = mkdtempSync(join(tmpdir(), 'theclaw-readme-config-'));
  try {
    const problems: string[] = [];
    for (const { file, load } of CONFIG_FILES) {
      ensureDir(join(home, file, '..'));
      // A part of an agent's config (its policy) is read as an agent's config, which names the agent.
      writeFileSync(join(home, file), file.startsWith('agents/') && !/^agent_id:/m.test(text) ? `agent_id: helper\n${text}` : text);
      try {
        load(home);
        return undefined;
      } catch (error) {
        problems.push(`as ${file}: ${(error as Error).message}`);
      }
    }
    return problems;
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

function where(block: DocumentBlock, line: number): string {
  return `${block.file}:${line} (section "${block.section}")`;
}

function firstLine(text: string): string {
  return text.split('\n')[0]!.replace(/\s+#.*$/, '');
}

function describeOutcome(outcome: Outcome): string {
  const how = outcome.timedOut ? `did not end within ${COMMAND_TIMEOUT_MS / 1000} s` : `exited ${outcome.code}`;
  const indent = (text: string) => text.trimEnd().replaceAll('\n', '\n    ');
  return [
    `\`${outcome.command.text}\` ${how} after ${(outcome.ms / 1000).toFixed(1)} s`,
    `  stdout: ${indent(outcome.stdout) || '(empty)'}`,
    `  stderr: ${indent(outcome.stderr) || '(empty)'}`,
    '  (fix the document or the code; if it cannot run in a test, mark it before its block: <!-- example: not run `<command>` (why) -->;',
    '  if it needs what the reader did before, e.g. theclaw up, add that to GIVEN in src/e2e/readme-examples.test.ts)',
  ].join('\n');
}
