import { spawn } from 'node:child_process';
import { userInfo } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { cliPath } from '../core/package.js';
import { GatewayState } from '../xgw/index.js';
import { lastUserText, startSystem, until, type System } from './support.js';

/**
 * `agent chat` as a person uses it, through the whole system: it says whom it talks to (agent and
 * model) and how to leave, and an answer that came after the chat was closed is shown the next
 * time, with the question it answers.
 */
let system: System | undefined;

afterAll(async () => {
  await system?.stop();
});

/** The questions whose answer comes after 3 s: the chat that asked is closed by then. */
const SLOW = ['a slow question', 'for admin'];

/**
 * One system for the tests (a start is most of a test's time), started by the first; each leaves
 * the terminal's mailbox with nothing unseen.
 */
async function up(): Promise<System> {
  system ??= await startSystem({
    logLevel: 'info',
    llm: { defaultStep: (request) => ({ kind: 'text', text: `the answer to "${lastUserText(request)}"`, delayMs: SLOW.includes(lastUserText(request)) ? 3_000 : 0 }) },
  });
  return system;
}

/** Whether the terminal mailbox holds an answer no chat has shown yet. */
function unseenAnswers(s: System): number {
  const state = new GatewayState(s.home);
  try {
    return state.unseen('terminal:local', userInfo().username).length;
  } finally {
    state.close();
  }
}

describe('agent chat', () => {
  it('says whom it talks to and how to leave, and shows an answer that came while it was closed with what it answers', { timeout: 60_000 }, async () => {
    const s = await up();
    const quick = await s.run('agent', ['chat', 'admin'], 'hello\n');
    expect(quick.code, quick.stderr).toBe(0);
    expect(quick.stderr).toContain('Chat with admin (fake/m1) through xgw. /quit or Ctrl-D leaves; /help lists the chat commands.');
    expect(quick.stdout).toBe('the answer to "hello"\n');

    // Closed before the answer came: the window is shut, the answer waits in the mailbox.
    const chat = spawn(process.execPath, [cliPath('agent'), 'chat', 'admin'], { env: s.env, stdio: ['pipe', 'ignore', 'ignore'] });
    chat.stdin.write('a slow question\n');
    await until(() => s.llm.requests.some((request) => lastUserText(request) === 'a slow question'), 'the question to reach the model', 20_000);
    chat.kill('SIGKILL');
    await until(() => unseenAnswers(s) === 1, 'the answer in the mailbox', 20_000);

    const later = await s.run('agent', ['chat', 'admin'], '');
    expect(later.code, later.stderr).toBe(0);
    expect(later.stdout).toBe('(earlier) you: a slow question\nthe answer to "a slow question"\n');
    expect(unseenAnswers(s)).toBe(0);
    const help = await s.run('agent', ['chat', '--help']);
    expect(help.stdout).toMatch(/\/quit, \/exit or Ctrl-D leaves/);
  });

  it("keeps an agent's waiting answer for the chat with that agent: not shown in another agent's chat", { timeout: 90_000 }, async () => {
    const s = await up();
    expect(unseenAnswers(s)).toBe(0);
    await s.must('agent', ['init', 'helper']);
    await s.must('agent', ['start', 'helper']);
    const chat = spawn(process.execPath, [cliPath('agent'), 'chat', 'admin'], { env: s.env, stdio: ['pipe', 'ignore', 'ignore'] });
    chat.stdin.write('for admin\n');
    await until(() => s.llm.requests.some((request) => lastUserText(request) === 'for admin'), 'the question to reach the model', 20_000);
    chat.kill('SIGKILL');
    await until(() => unseenAnswers(s) === 1, "admin's answer in the mailbox", 20_000);

    const helper = await s.run('agent', ['chat', 'helper'], 'hello helper\n');
    expect(helper.code, helper.stderr).toBe(0);
    expect(helper.stdout).toBe('the answer to "hello helper"\n');
    expect(unseenAnswers(s)).toBe(1);

    const admin = await s.run('agent', ['chat', 'admin'], '');
    expect(admin.code, admin.stderr).toBe(0);
    expect(admin.stdout).toBe('(earlier) you: for admin\nthe answer to "for admin"\n');
    expect(unseenAnswers(s)).toBe(0);
  });
});
