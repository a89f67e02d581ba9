import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { FakeStep, LooseJson } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { contentText, lastUserText, openWebchatPage, startSystem, until, type System } from './support.js';

/**
 * Admin manages agents from the chat under the default sandbox (issue 23 §1), through the whole
 * system (real bwrap, notifier, xgw; a scripted model, a fake Telegram): the commands of its
 * turn leave requests that the runtime carries out outside the sandbox while the call runs, so
 * the model sees in the same call whether they worked; only in the owner's direct chat.
 */
const OWNER = 7171;
const PEER = 7272;

const GARDENER_IDENTITY = '# gardener\n\nI keep the garden notes.';
const CREATE = [
  'agent init gardener',
  `agent identity set gardener --text $'${GARDENER_IDENTITY.replaceAll('\n', '\\n')}'`,
  'agent start gardener',
  `xgw route add --channel telegram:main --peer ${OWNER} --agent gardener`,
  'agent status gardener --json',
].join(' && ');
const READ = 'cat "$THECLAW_HOME/agents/gardener/IDENTITY.md" "$THECLAW_HOME/agents/gardener/USAGE.md"';

let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

interface ToolResult {
  stdout: string;
  stderr: string;
  exit_code: number;
}

const systemPrompt = (messages: LooseJson[]) => contentText(messages.find((message) => message.role === 'system')?.content);

const model: FakeStep = (request) => {
  const messages: LooseJson[] = request.body?.messages ?? [];
  const last = messages.at(-1);
  if (systemPrompt(messages).includes('I keep the garden notes.')) return { kind: 'text', text: `gardener: ${lastUserText(request)}` };
  if (last?.role === 'tool') {
    const result = JSON.parse(contentText(last.content)) as ToolResult;
    return { kind: 'text', text: `admin: exit ${result.exit_code}` };
  }
  if (lastUserText(request) === 'make me a gardener') return { kind: 'tool_call', name: 'bash_exec', arguments: { command: CREATE } };
  if (lastUserText(request) === 'who is gardener?') return { kind: 'tool_call', name: 'bash_exec', arguments: { command: READ } };
  return { kind: 'text', text: `admin: ${lastUserText(request)}` };
};

/** The tool results admin's model was shown, in order. */
function toolResults(s: System): ToolResult[] {
  return s.llm.requests.flatMap((request) => {
    const last = (request.body?.messages as LooseJson[] | undefined)?.at(-1);
    return last?.role === 'tool' ? [JSON.parse(contentText(last.content)) as ToolResult] : [];
  });
}

describe('admin manages agents from the chat, in the sandbox', () => {
  it("creates, starts and routes gardener for the owner, who gets gardener's answer next; a Telegram peer asking the same is refused with 126", { timeout: 120_000 }, async () => {
    const s = await startSystem({ logLevel: 'info', llm: { defaultStep: model }, policy: `{ owners: ["telegram:main:${OWNER}"], rules: [{ bash: allow }] }` });
    system = s;
    const gardener = join(s.home, 'agents', 'gardener');

    s.telegram.queueUpdate(textUpdate({ from: PEER, text: 'make me a gardener' }));
    await until(() => s.telegram.sent.some((sent) => sent.chat_id === PEER && sent.text.startsWith('admin: exit')), "admin's answer to the peer", 60_000);
    const [refused] = toolResults(s);
    expect(refused).toMatchObject({ exit_code: 126, stdout: '' });
    expect(refused!.stderr).toMatch(/^Error: agent init is carried out only in the owner's direct chat with admin, and this turn is not one - /);
    expect(existsSync(gardener)).toBe(false);

    s.telegram.queueUpdate(textUpdate({ from: OWNER, text: 'make me a gardener' }));
    await until(() => s.telegram.sent.some((sent) => sent.chat_id === OWNER && sent.text.startsWith('admin: exit')), "admin's answer to the owner", 90_000);
    const created = toolResults(s)[1]!;
    expect(created.stderr).toBe('');
    expect(created.exit_code).toBe(0);
    expect(created.stdout).toContain('created agent gardener');
    expect(created.stdout).toContain(`added the route of channel telegram:main and peer ${OWNER} to gardener`);
    expect(JSON.parse(created.stdout.slice(created.stdout.lastIndexOf('\n{')))).toMatchObject({ id: 'gardener', started: true });
    expect(s.telegram.sent.filter((sent) => sent.chat_id === OWNER).map((sent) => sent.text)).toEqual(['admin: exit 0']);
    expect(readFileSync(join(gardener, 'IDENTITY.md'), 'utf8')).toBe(`${GARDENER_IDENTITY}\n`);

    s.telegram.queueUpdate(textUpdate({ from: OWNER, text: 'how are the roses?' }));
    await until(() => s.telegram.sent.some((sent) => sent.chat_id === OWNER && sent.text === 'gardener: how are the roses?'), "gardener's answer", 60_000);
    s.telegram.queueUpdate(textUpdate({ from: PEER, text: 'still admin?' }));
    await until(() => s.telegram.sent.some((sent) => sent.chat_id === PEER && sent.text === 'admin: still admin?'), "admin's answer to the peer", 60_000);

    // The owner's web chat, still admin's: a later turn reads gardener's texts.
    const page = await openWebchatPage(s);
    try {
      page.ws.send(JSON.stringify({ type: 'message', id: 'w-1', text: 'who is gardener?' }));
      await until(() => toolResults(s).length === 3, 'the reading turn', 60_000);
    } finally {
      page.ws.close();
    }
    const read = toolResults(s)[2]!;
    expect(read.exit_code).toBe(0);
    expect(read.stdout).toContain(`${GARDENER_IDENTITY}\n# gardener`);
  });
});
