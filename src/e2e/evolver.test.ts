import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { FakeStep, LooseJson, RecordedRequest } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { contentText, lastUserText, openWebchatPage, startSystem, until, type System } from './support.js';

/**
 * The evolver through the whole system (real notifier, xgw, agent; fake model and Telegram): the
 * owner corrects admin in the web chat and a Telegram peer tells it a secret; the reflection's
 * model reads the owner's correction and never the peer's words, and proposes a memory; the
 * proposal reaches the owner's web chat with its diff; `/approve` applies it and keeps the file
 * as it was; the next day's proposal, denied, leaves the file untouched.
 */
let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

const isReflection = (request: RecordedRequest) => contentText((request.body?.messages as LooseJson[] | undefined)?.[0]?.content).startsWith('You are evolver');

const MEMORY = '# What I learned\n- The owner does not want to be called sir.\n';
const IDENTITY = '# admin\n\nI am admin. I never call the owner sir.\n';
let reflections = 0;
const model: FakeStep = (request) => {
  if (!isReflection(request)) return { kind: 'text', text: `echo: ${lastUserText(request)}` };
  reflections++;
  const proposal =
    reflections === 1
      ? { file: 'memory/agent.md', summary: 'Remember that the owner does not want to be called sir.', text: MEMORY }
      : { file: 'IDENTITY.md', summary: 'Say it in the identity too.', text: IDENTITY };
  return { kind: 'text', text: `\`\`\`json\n${JSON.stringify({ proposals: [proposal] })}\n\`\`\`` };
};

describe('the evolver', () => {
  it("proposes from the owner's correction only; /approve applies the proposal keeping the old file, /deny leaves the file untouched", { timeout: 90_000 }, async () => {
    const s = await startSystem({ llm: { defaultStep: model } });
    system = s;
    const admin = join(s.home, 'agents', 'admin');
    const { ws, received } = await openWebchatPage(s);
    const say = async (id: string, text: string, answer: (m: LooseJson) => boolean) => {
      ws.send(JSON.stringify({ type: 'message', id, text }));
      return until(() => received.find((m) => m.type === 'message' && answer(m.message))?.message, `the answer to ${text}`, 20_000);
    };
    const proposalNotice = (n: number) => until(() => received.filter((m) => m.type === 'message' && String(m.message.text).startsWith('evolver:'))[n]?.message, `proposal notice ${n + 1}`, 20_000);
    try {
      await say('m1', "no, don't call me sir", (m) => m.text === "echo: no, don't call me sir");
      s.telegram.queueUpdate(textUpdate({ from: 8181, text: 'my bank pin is 4711, please never tell' }));
      await until(() => s.telegram.sent.length === 1, 'the answer on Telegram', 20_000);
      const identityBefore = readFileSync(join(admin, 'IDENTITY.md'), 'utf8');

      const first = await s.must('theclaw', ['evolve']);
      expect(first.stdout).toMatch(/^reflected on .*: 1 model call\(s\)/);
      expect(first.stdout).toMatch(/ {2}admin: proposed\n {4}[a-z0-9]{5} memory\/agent\.md: Remember that the owner does not want to be called sir\.\n/);
      const digest = lastUserText(s.llm.requests.find(isReflection)!);
      expect(digest).toContain(`"no, don't call me sir"`);
      expect(digest).not.toContain('4711');

      const notice = await proposalNotice(0);
      expect(notice.notice).toBe('approval');
      expect(notice.text).toMatch(
        /^evolver: a proposed change to admin's memory\/agent\.md \(\+2 -0 lines\), from its day: Remember that the owner does not want to be called sir\.\n@@ -0,0 \+1,2 @@\n\+# What I learned\n/,
      );
      const code = /\/approve ([a-z0-9]{5})/.exec(notice.text)![1]!;
      const listed = JSON.parse((await s.must('agent', ['approvals', 'admin', '--json'])).stdout);
      expect(listed).toMatchObject([{ kind: 'proposal', code, file: 'memory/agent.md' }]);

      const applied = await say('m2', `/approve ${code}`, (m) => String(m.text).startsWith('Applied:'));
      expect(applied.text).toBe(`Applied: admin's memory/agent.md (+2 -0 lines). The file as it was is kept in agents/admin/proposals/${code}.before.md.`);
      expect(readFileSync(join(admin, 'memory', 'agent.md'), 'utf8')).toBe(MEMORY);
      expect(existsSync(join(admin, 'proposals', `${code}.before.md`))).toBe(true);

      // The next reflection covers what came since the first: the /approve. Its proposal is denied.
      await s.must('theclaw', ['evolve']);
      const second = await proposalNotice(1);
      expect(second.text).toMatch(/^evolver: a proposed change to admin's IDENTITY\.md/);
      const secondCode = /\/deny ([a-z0-9]{5})/.exec(second.text)![1]!;
      const denied = await say('m3', `/deny ${secondCode}`, (m) => String(m.text).startsWith('Dropped:'));
      expect(denied.text).toBe(`Dropped: proposal ${secondCode} (admin's IDENTITY.md); the file is unchanged.`);
      expect(readFileSync(join(admin, 'IDENTITY.md'), 'utf8')).toBe(identityBefore);
      expect((await s.must('agent', ['approvals', 'admin'])).stdout).toBe('nothing waits for approval\n');
    } finally {
      ws.close();
    }
  });
});
