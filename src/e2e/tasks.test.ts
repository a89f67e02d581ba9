import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { TaskRow } from '../agent/task-store.js';
import { daemonHolder } from '../core/daemon.js';
import { parseMessageContent } from '../core/message.js';
import type { FakeStep, LooseJson } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { contentText, lastUserText, settle, startSystem, until, type System } from './support.js';

/**
 * Background tasks through the whole system, admin's commands in bubblewrap: a Telegram person
 * asks admin for research; admin's turn runs `agent delegate helper …` (a request through the
 * turn's outbox, started by the runtime when the command ends) and answers "started" at once.
 * helper's model waits for the test to let it answer, so `/tasks` shows the task running in
 * between, and notifier is SIGKILLed and started again meanwhile; then the result comes back
 * into the person's conversation with admin, and admin's next turn tells the person — once.
 */
let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

/** The stdout bash_exec returned in the request's last (tool) message. */
function toolStdout(messages: LooseJson[]): string {
  return JSON.parse(contentText(messages.at(-1)?.content)).stdout as string;
}

/** helper's answer to a task waits for `release`; `asked` counts its calls. */
function scriptedModels() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const helperCalls: string[] = [];
  const step: FakeStep = async (request) => {
    const messages: LooseJson[] = request.body?.messages ?? [];
    const text = lastUserText(request);
    if (text.startsWith('[Task ') && text.includes('from admin]')) {
      helperCalls.push(text);
      await gate;
      return { kind: 'text', text: 'Three direct flights on Tuesdays.' };
    }
    if (text.startsWith('[Task ') && text.includes('at helper finished]')) return { kind: 'text', text: `Your research is back: ${text.replace(/^\[[^\]]*\] /, '')}` };
    if (messages.at(-1)?.role === 'tool') return { kind: 'text', text: `Started: ${toolStdout(messages).trim()}` };
    return { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'agent delegate helper --task "find flights to Lisbon in May" --label flights' } };
  };
  return { step, release, helperCalls };
}

describe('background tasks', () => {
  it('answers "started" at once, lists the task running, survives a SIGKILLed notifier, then tells the result once', { timeout: 240_000 }, async () => {
    const models = scriptedModels();
    const s = await startSystem({ llm: { defaultStep: models.step } });
    system = s;
    await s.must('agent', ['init', 'helper']);
    await s.must('agent', ['start', 'helper']);
    const sentTo = () => s.telegram.sent.filter((sent) => Number(sent.chat_id) === 4242).map((sent) => String(sent.text));

    s.telegram.queueUpdate(textUpdate({ from: 4242, text: 'research flights to Lisbon for me' }));
    // A streamed answer is sent as it is written and edited after: each wait is for the whole text.
    const started = /^Started: task (t-[0-9a-f]{8}) starts when this command ends at helper; its result comes back into this conversation \(see: \/tasks\)$/;
    const id = (await until(() => started.exec(sentTo()[0] ?? ''), '"started"', 30_000))[1];
    await until(() => models.helperCalls.length > 0, "helper's model at work", 30_000);
    expect(models.helperCalls[0]).toBe(`[Task ${id} "flights" from admin] find flights to Lisbon in May\n(My answer here is the task's result: it goes back to where the task was started.)`);

    s.telegram.queueUpdate(textUpdate({ from: 4242, text: '/tasks' }));
    const listed = new RegExp(
      `^Tasks of this conversation:\\n- ${id} "flights" at helper: running since \\d\\d:\\d\\d:\\d\\d UTC - find flights to Lisbon in May\\nStop one with /tasks stop <id>\\.$`,
    );
    await until(() => listed.test(sentTo()[1] ?? ''), 'the /tasks answer', 30_000);

    // notifier dies without a word while helper works on the task, and is started again.
    process.kill(daemonHolder(s.home, 'notifier')!.pid, 'SIGKILL');
    await until(() => daemonHolder(s.home, 'notifier') === null, 'notifier gone', 10_000);
    await s.must('notifier', ['start']);
    models.release();

    await until(() => sentTo()[2] === 'Your research is back: Three direct flights on Tuesdays.', 'the result', 60_000);
    await settle(s);
    expect(sentTo()).toHaveLength(3);

    const tasks = JSON.parse((await s.must('agent', ['tasks', 'admin', '--json'])).stdout) as TaskRow[];
    expect(tasks).toEqual([expect.objectContaining({ id, target: 'helper', label: 'flights', state: 'done', conversation: 'peer-telegram.main.4242', depth: 1 })]);
    // One task message at helper, one result in admin's inbox: nothing lost, nothing twice.
    const inboxTexts = (agent: string) => s.events(join(s.home, 'agents', agent, 'inbox')).map((e) => parseMessageContent(e.content).text);
    expect(inboxTexts('helper').filter((text) => text.startsWith('[Task '))).toHaveLength(1);
    expect(inboxTexts('admin').filter((text) => text.startsWith('[Task '))).toEqual([`[Task ${id} "flights" at helper finished] Three direct flights on Tuesdays.`]);
  });
});
