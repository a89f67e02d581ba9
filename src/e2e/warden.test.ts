import { afterEach, describe, expect, it } from 'vitest';
import type { FakeStep, LooseJson } from '../testing/fake-llm.js';
import { lastUserText, openWebchatPage, startSystem, until, type System } from './support.js';

/**
 * The warden through the whole system (real notifier, xgw, agent and sandbox; fake model): a
 * turn in the owner's web chat runs `rm -rf ~` (refused by the policy, so that nothing is
 * deleted) and `ls`; one sweep reports the first to the owner's web chat, once, and never the
 * second.
 */
let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

const model: FakeStep = (request) => {
  const messages: LooseJson[] = request.body?.messages ?? [];
  if (messages.at(-1)?.role === 'user' && lastUserText(request) === 'tidy up') {
    return {
      kind: 'tool_calls',
      calls: [
        { name: 'bash_exec', arguments: { command: 'rm -rf ~' } },
        { name: 'bash_exec', arguments: { command: 'ls' } },
      ],
    };
  }
  return { kind: 'text', text: `done: ${lastUserText(request)}` };
};

describe('the warden', () => {
  it("reports an agent's rm -rf ~ to the owner's web chat once within one sweep, and never its ls", { timeout: 60_000 }, async () => {
    const s = await startSystem({ llm: { defaultStep: model }, policy: '{ rules: [{ bash: { deny: [rm], otherwise: allow } }] }' });
    system = s;
    const { ws, received } = await openWebchatPage(s);
    const reports = () => received.filter((m) => m.type === 'message' && String(m.message.text).startsWith('warden:'));
    try {
      ws.send(JSON.stringify({ type: 'message', id: 'tidy-1', text: 'tidy up' }));
      await until(() => received.some((m) => m.type === 'message' && m.message.text === 'done: tidy up'), 'the answer', 20_000);

      const sweep = await s.must('theclaw', ['ward']);
      expect(sweep.stdout).toMatch(/^reviewed 2 command\(s\); found 1 new dangerous one\(s\)\n {2}admin peer-webchat\.main\.[0-9a-f]+ #\d+: delete-everything: rm -rf ~\n$/);
      const report = await until(() => reports()[0]?.message, 'the report', 20_000);
      expect(report.notice).toBe('error');
      expect(report.text).toMatch(/^warden: admin ran a dangerous command in conversation peer-webchat\.main\.[0-9a-f]+ \(its record \d+\):\nrm -rf ~\nWhy: it deletes the home directory/);
      expect(report.text).toContain('It was refused (exit 126): it did not run.');

      // The next sweep has nothing new; and a turn's ls is never reported.
      expect((await s.must('theclaw', ['ward'])).stdout).toBe('reviewed 0 command(s); nothing new is dangerous\n');
      ws.send(JSON.stringify({ type: 'message', id: 'hi-1', text: 'hello' }));
      await until(() => received.some((m) => m.type === 'message' && m.message.text === 'done: hello'), 'the second answer', 20_000);
      expect(reports()).toHaveLength(1);
    } finally {
      ws.close();
    }
  });
});
