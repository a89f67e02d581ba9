import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { parse, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { formatMessageContent, parseMessageContent, type ExternalReplyContext } from '../core/message.js';
import type { ModelCaller, ModelRequest } from '../pai/index.js';
import { createTestHome, threadEvents, type TestHome } from '../testing/index.js';
import { openThread } from '../thread/index.js';
import { SUMMARISER_PROMPT } from './turn/compaction.js';
import { deliverReplies } from './delivery/deliver.js';
import { conversationThreads, initAgent } from './lifecycle.js';
import { CONDENSE_PROMPT } from './turn/memory-condense.js';
import { FLUSH_PROMPT } from './turn/memory-flush.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { sendToAgent } from './send.js';
import { ROUTING_MODES, type RoutingMode } from './types.js';

// The privacy property of issue 10 §1 (and issue 25 §3: a group's pending context stays the
// group's, new in one turn only), on real agent runs (real threads and inboxes, bash_exec,
// real deliveries between the agents; only the model is a function): for random interleavings of
// direct and group messages from several people, some delegated by admin to a helper agent whose
// answers come back while others write, no request admin sends to the model holds another
// conversation's text or a memory that is not the conversation's, no request of the helper holds
// text of another of admin's conversations than the one that asked it, nor anyone's memory, and
// every reply — a relayed answer too — goes to the conversation of the message it answers.
//
// Memory upkeep runs all along (issue 13 §2): admin's conversations are compacted after a few
// messages, each compaction flushing facts into memory files, and the memory files start over
// their caps, so they are condensed. The model copies every marker it is shown into what it
// writes (summaries, flushed facts, condensed files), so that text travels as far as the
// runtime lets it: no upkeep request holds two conversations' text or two memory files, and each
// memory file holds only the text of the conversations that see it.
//
// Admin asks through bash_exec: the command hands the environment agent run gave it to the test,
// which sends the question in-process with it (sendToAgent, what `agent send` runs), so that twenty
// runs need no `agent` process each; the end-to-end tests run the real `agent send`.

const PEOPLE = ['101', '102', '103'];
const GROUPS = ['-100', '-200'];

interface Message {
  person: string;
  /** 'dm' or a group's chat id. */
  where: string;
  /** Admin asks the helper about it (`agent send` in bash_exec) and passes the answer on. */
  delegate: boolean;
  /** What runs after it arrives: nothing, admin, or admin then helper then helper's deliveries. */
  next: 'wait' | 'admin' | 'all';
  /**
   * It comes with a group's pending context (xgw's `group_context`: what was said there without a
   * mention), `<<c{index}>>`; on a direct message (which xgw never sends) it must show nowhere.
   */
  context?: boolean;
}

const message = fc.record({
  person: fc.constantFrom(...PEOPLE),
  where: fc.constantFrom('dm', ...GROUPS),
  delegate: fc.nat(4).map((n) => n === 0),
  next: fc.constantFrom('wait', 'admin', 'all'),
  context: fc.boolean(),
});
const scenario = fc.record({
  mode: fc.constantFrom<RoutingMode>(...ROUTING_MODES),
  helperMode: fc.constantFrom<RoutingMode>(...ROUTING_MODES),
  messages: fc.array(message, { minLength: 1, maxLength: 6 }).map((list) => {
    let delegations = 0;
    return list.map((m) => ({ ...m, delegate: m.delegate && ++delegations <= 2 }));
  }),
});

const marker = (index: number) => `<<m${index}>>`;
const userMemory = (person: string) => `<<user-memory-${person}>>`;
const groupMemory = (group: string) => `<<group-memory-${group}>>`;
const MARKERS = /<<m(\d+)>>/g;
const contextMarker = (index: number) => `<<c${index}>>`;
const CONTEXTS = /<<c(\d+)>>/g;
const USER_MEMORIES = /<<user-memory-(\d+)>>/g;
const GROUP_MEMORIES = /<<group-memory-(-\d+)>>/g;

function sourceOf(m: Message): string {
  const conversationType = m.where === 'dm' ? 'dm' : 'group';
  return formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType, conversationId: m.where === 'dm' ? m.person : m.where, peerId: m.person });
}

/** Where the answer to message `index` must go: its chat, its sender, quoting it. */
function contextOf(m: Message, index: number): ExternalReplyContext {
  return {
    kind: 'external',
    channel_id: 'telegram:main',
    conversation_type: m.where === 'dm' ? 'dm' : 'group',
    conversation_id: m.where === 'dm' ? m.person : m.where,
    peer_id: m.person,
    message_id: String(index + 1),
  };
}

/** The conversation a message's pending context belongs to: its group's; a direct message's has none. */
function contextConversationOf(m: Message, mode: RoutingMode): string {
  return m.where === 'dm' ? 'nowhere' : conversationOf(m, mode);
}

/** The conversation a message belongs to: a group is one; direct messages are grouped as the mode says. */
function conversationOf(m: Message, mode: RoutingMode): string {
  if (m.where !== 'dm') return `group ${m.where}`;
  return mode === 'per-peer' ? `dm ${m.person}` : 'direct messages';
}

interface Requests {
  admin: ModelRequest[];
  helper: ModelRequest[];
  /** Compaction summaries, memory flushes and condensed files, of both agents. */
  upkeep: ModelRequest[];
}

const UPKEEP_PROMPTS = [SUMMARISER_PROMPT, FLUSH_PROMPT, CONDENSE_PROMPT];

/** The upkeep calls' answers carry every marker of their input on. */
function upkeepAnswer(request: ModelRequest): string {
  const input = request.history.at(-1)!.content;
  const said = [...[...new Set(all(MARKERS, input))].map(Number).map(marker), ...[...new Set(all(CONTEXTS, input))].map(Number).map(contextMarker)];
  if (request.system === FLUSH_PROMPT) return `FACTS:\n${said.map((m) => `- said ${m}`).join('\n') || '- none'}\nNOTES:\n- talked`;
  const memories = [...new Set([...all(USER_MEMORIES, input).map(userMemory), ...all(GROUP_MEMORIES, input).map(groupMemory)])];
  return [...memories, ...said].join(' ') || 'nothing';
}

/**
 * The model of both agents: admin notes messages, delegates the marked ones (a command that writes
 * the question with its environment to `asks`) and passes answers on; the helper answers.
 */
function fakeModel(requests: Requests, asks: string): ModelCaller {
  return async (request) => {
    const agent = /^- agent: (\S+)/m.exec(request.system)?.[1];
    const last = request.history.at(-1)!;
    const reply = (text: string, command?: string) => ({
      ok: true as const,
      reply: {
        text,
        toolCalls: command ? [{ id: 'call-1', name: 'bash_exec', arguments: { command } }] : [],
        usage: { input: 1, output: 1, cache_read: 0, cache_write: 0, cost: 0 },
      },
    });
    if (UPKEEP_PROMPTS.includes(request.system)) {
      requests.upkeep.push(structuredClone(request));
      return reply(upkeepAnswer(request));
    }
    if (agent === 'helper') {
      requests.helper.push(structuredClone(request));
      return reply(`answer for ${all(MARKERS, last.content).map(Number).map(marker).join(' ')}`);
    }
    requests.admin.push(structuredClone(request));
    if (last.role === 'tool') return reply('I asked the helper.');
    if (last.content.startsWith('answer for ')) return reply('The helper says so.');
    if (last.content.endsWith(' DELEGATE')) {
      // On one line: a group's pending context, passed on with the question, comes in lines of its own.
      const question = `question for ${last.content.replace(' DELEGATE', '').replaceAll('\n', ' ')}`;
      return reply('', `echo "$THECLAW_AGENT $THECLAW_CONVERSATION $THECLAW_ASKING_EVENT ${question}" >> ${asks}`);
    }
    return reply('Noted.');
  };
}

/** The current input of a request: its last user line (tool rounds come after it). */
function currentInput(request: ModelRequest): string {
  return request.history.findLast((line) => line.role === 'user')!.content;
}

const all = (pattern: RegExp, text: string) => [...text.matchAll(pattern)].map((match) => match[1]!);

interface Scenario {
  mode: RoutingMode;
  /** The helper's routing mode: its threads for admin's questions are the same in every one. */
  helperMode?: RoutingMode;
  messages: Message[];
}

/** Checks a scenario; returns the upkeep requests, to show what it exercised. */
async function check({ mode, helperMode = 'per-peer', messages }: Scenario): Promise<ModelRequest[]> {
  const t: TestHome = createTestHome();
  try {
    mkdirSync(join(t.home, 'pai'));
    writeFileSync(join(t.home, 'pai', 'config.yaml'), 'default: mock/echo\n');
    const admin = await initAgent(t.home, 'admin');
    const helper = await initAgent(t.home, 'helper');
    for (const [dir, routing] of [
      [admin, mode],
      [helper, helperMode],
    ] as const) {
      // Every person's and group's commands run: the delegation is a command, and the privacy of a
      // conversation must hold whatever the policy lets run.
      // Compacted (and flushed) from the third message of a conversation on; memory condensed past 100 tokens.
      const context = { recent_messages: 2, keep_recent: 1, memory_caps: { agent: 100, person: 100 } };
      writeFileSync(dir.config, stringify({ ...parse(readFileSync(dir.config, 'utf8')), routing: { default: routing }, policy: { rules: [{ bash: 'allow' }] }, context }));
    }
    const filler = '- a note about nothing in particular\n'.repeat(15);
    const userFile = (person: string) => join(admin.memory, `user-${routeMessage(admin, 'per-peer', sourceOf({ person, where: 'dm', delegate: false, next: 'wait' })).peerKey}.md`);
    const groupFile = (group: string) => join(admin.memory, `group-${routeMessage(admin, mode, sourceOf({ person: PEOPLE[0]!, where: group, delegate: false, next: 'wait' })).groupKey}.md`);
    for (const person of PEOPLE) writeFileSync(userFile(person), `${userMemory(person)}\n${filler}`);
    for (const group of GROUPS) writeFileSync(groupFile(group), `${groupMemory(group)}\n${filler}`);
    writeFileSync(join(admin.memory, 'agent.md'), filler);
    const requests: Requests = { admin: [], helper: [], upkeep: [] };
    // In the turn's workdir: its commands run in the sandbox, where that is where they may write,
    // and each conversation of these people has one of its own (none is the owner's).
    const caller = fakeModel(requests, 'asks');
    const runAdmin = () => runAgent('admin', { home: t.home, env: t.env, caller });
    /** The questions admin's commands asked, sent as `agent send helper` would in that environment. */
    const sendAsked = async () => {
      const workdirs = join(admin.root, 'workdirs');
      for (const asks of (existsSync(workdirs) ? readdirSync(workdirs) : []).map((name) => join(workdirs, name, 'asks')).filter(existsSync)) {
        for (const line of readFileSync(asks, 'utf8').trim().split('\n')) {
          const [agent, conversation, asking, ...question] = line.split(' ');
          expect(asks).toBe(join(workdirs, conversation!, 'asks'));
          await sendToAgent(t.home, 'helper', { text: question.join(' '), env: { THECLAW_AGENT: agent, THECLAW_CONVERSATION: conversation, THECLAW_ASKING_EVENT: asking } });
        }
        rmSync(asks);
      }
      expect(existsSync(join(admin.workdir, 'asks'))).toBe(false);
    };
    const runAll = async () => {
      await runAdmin();
      await sendAsked();
      await runAgent('helper', { home: t.home, env: t.env, caller });
      for (const thread of conversationThreads(helper)) await deliverReplies({ thread, consumer: 'outbound', home: t.home, env: t.env });
    };

    for (const [index, m] of messages.entries()) {
      const inbox = openThread(admin.inbox, { home: t.home });
      const text = `${marker(index)}${m.delegate ? ' DELEGATE' : ''}`;
      const groupContext = m.context ? { group_context: [{ peer_id: '9', name: 'Zed', text: contextMarker(index), at: new Date().toISOString() }] } : {};
      inbox.push({ source: sourceOf(m), type: 'message', content: formatMessageContent({ text, attachments: [], reply_context: contextOf(m, index), ...groupContext }) });
      inbox.close();
      if (m.next === 'admin') await runAdmin();
      if (m.next === 'all') await runAll();
    }
    await runAll();
    await runAll(); // the last answers, passed on

    // No request holds another conversation's text, nor a memory that is not its own.
    for (const request of requests.admin) {
      const input = currentInput(request);
      const [current, ...more] = all(MARKERS, input).map(Number);
      expect(more, input).toEqual([]);
      const conversation = conversationOf(messages[current!]!, mode);
      const text = JSON.stringify(request);
      for (const seen of all(MARKERS, text).map(Number)) expect(conversationOf(messages[seen]!, mode), `${conversation} request holds ${marker(seen)}`).toBe(conversation);
      // A group's pending context only in that group's requests, and new only in the turn of the message it came with.
      for (const seen of all(CONTEXTS, text).map(Number)) expect(contextConversationOf(messages[seen]!, mode), `${conversation} request holds ${contextMarker(seen)}`).toBe(conversation);
      const pending = !input.startsWith('answer for ') && messages[current!]!.context && messages[current!]!.where !== 'dm' ? [String(current)] : [];
      expect(all(CONTEXTS, input), input).toEqual(pending);
      // A person's memory only in their own direct conversation; in a shared one only while they
      // write (not for an agent's answer); never in a group.
      const sender = messages[current!]!;
      const personal = sender.where === 'dm' && (mode === 'per-peer' || !input.startsWith('answer for ')) ? [sender.person] : [];
      expect(all(USER_MEMORIES, text), `${conversation}: ${input}`).toEqual(personal);
      expect(all(GROUP_MEMORIES, text), `${conversation}: ${input}`).toEqual(sender.where === 'dm' ? [] : [sender.where]);
    }

    // The helper's requests hold the text of the one conversation of admin that asked, and no
    // memory but its own: a question is not a person, nor are admin's conversations one.
    expect(requests.helper).toHaveLength(messages.filter((m) => m.delegate).length);
    for (const request of requests.helper) {
      const input = currentInput(request);
      const [asked, ...more] = all(MARKERS, input).map(Number);
      expect(more, input).toEqual([]);
      const conversation = conversationOf(messages[asked!]!, mode);
      for (const seen of all(MARKERS, JSON.stringify(request)).map(Number)) expect(conversationOf(messages[seen]!, mode), `helper asked from ${conversation} holds ${marker(seen)}`).toBe(conversation);
      for (const seen of all(CONTEXTS, JSON.stringify(request)).map(Number))
        expect(contextConversationOf(messages[seen]!, mode), `helper asked from ${conversation} holds ${contextMarker(seen)}`).toBe(conversation);
      expect(request.system).toMatch(/^- memory files: agent \S+$/m);
    }

    // An upkeep call holds the text of one conversation and one memory file at most, and the
    // memory file's text only with the text of a conversation that sees that file.
    for (const request of requests.upkeep) {
      const text = JSON.stringify(request.history);
      const conversations = new Set([
        ...all(MARKERS, text).map((seen) => conversationOf(messages[Number(seen)]!, mode)),
        ...all(CONTEXTS, text).map((seen) => contextConversationOf(messages[Number(seen)]!, mode)),
      ]);
      expect(conversations.has('nowhere'), text).toBe(false);
      const users = [...new Set(all(USER_MEMORIES, text))];
      const groups = [...new Set(all(GROUP_MEMORIES, text))];
      expect(conversations.size, text).toBeLessThanOrEqual(1);
      expect(users.length + groups.length, text).toBeLessThanOrEqual(1);
      for (const conversation of conversations) {
        if (users.length) expect(conversation, text).toBe(`dm ${users[0]}`);
        if (groups.length) expect(conversation, text).toBe(`group ${groups[0]}`);
      }
    }
    // Each memory file holds its own memory and text of the conversations that see it only; the
    // agent's, which every conversation sees, none.
    const markersIn = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8') : '');
    for (const person of PEOPLE) {
      const text = markersIn(userFile(person));
      expect(all(USER_MEMORIES, text), text).toEqual([person]);
      expect(all(GROUP_MEMORIES, text), text).toEqual([]);
      for (const seen of all(MARKERS, text)) expect(conversationOf(messages[Number(seen)]!, mode), text).toBe(`dm ${person}`);
      expect(all(CONTEXTS, text), text).toEqual([]);
    }
    for (const group of GROUPS) {
      const text = markersIn(groupFile(group));
      expect(all(GROUP_MEMORIES, text), text).toEqual([group]);
      expect(all(USER_MEMORIES, text), text).toEqual([]);
      for (const seen of all(MARKERS, text)) expect(conversationOf(messages[Number(seen)]!, mode), text).toBe(`group ${group}`);
      for (const seen of all(CONTEXTS, text)) expect(contextConversationOf(messages[Number(seen)]!, mode), text).toBe(`group ${group}`);
    }
    expect(markersIn(join(admin.memory, 'agent.md'))).not.toMatch(/<</);

    // Every message has one reply, to its own conversation; every delegated one a second, the
    // helper's answer passed on to it.
    const replies = conversationThreads(admin).flatMap((path) => {
      const events = threadEvents(t.home, path, "type = 'message'");
      return events
        .filter((event) => event.source === 'self')
        .map((event) => {
          const content = parseMessageContent(event.content);
          const answered = parseMessageContent(events.find((e) => e.id === content.in_reply_to)!.content).text;
          return { answered, context: content.reply_context };
        });
    });
    const expected = messages.flatMap((m, index) => [
      { answered: `${marker(index)}${m.delegate ? ' DELEGATE' : ''}`, context: contextOf(m, index) },
      ...(m.delegate ? [{ answered: `answer for ${marker(index)}`, context: contextOf(m, index) }] : []),
    ]);
    const byText = (a: { answered: string }, b: { answered: string }) => a.answered.localeCompare(b.answered);
    expect(replies.sort(byText)).toEqual(expected.sort(byText));
    return requests.upkeep;
  } finally {
    t.cleanup();
  }
}

describe('privacy: a conversation is a conversation', () => {
  it('keeps every request to its own conversation and every reply to the conversation it answers, for random interleavings (property)', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        await check(s);
      }),
      { numRuns: 20 },
    );
  }, 120_000);

  it('does so in the case of the issue: a private answer, delegated, while the person writes in a group', async () => {
    const dm = { person: '101', where: 'dm' };
    await check({
      mode: 'per-peer',
      messages: [
        { ...dm, delegate: true, next: 'admin' },
        { person: '101', where: '-100', delegate: false, next: 'all' },
      ],
    });
    await check({
      mode: 'per-channel',
      messages: [
        { ...dm, delegate: true, next: 'admin' },
        { person: '102', where: 'dm', delegate: false, next: 'all' },
      ],
    });
  }, 60_000);

  it("does so while a person's direct chat is flushed into their memory file and it is condensed, between their group messages", async () => {
    const dm = { person: '101', where: 'dm', delegate: false, next: 'admin' } as const;
    const upkeep = await check({
      mode: 'per-peer',
      messages: [
        dm,
        { ...dm, delegate: true },
        { person: '101', where: '-100', delegate: false, next: 'admin' },
        dm,
        { ...dm, next: 'all' },
        { person: '102', where: '-100', delegate: false, next: 'all' },
      ],
    });
    const flushes = upkeep.filter((request) => request.system === FLUSH_PROMPT).map((request) => request.history.at(-1)!.content);
    expect(flushes.some((input) => input.includes(userMemory('101')) && input.includes(marker(0)))).toBe(true);
    expect(upkeep.some((request) => request.system === CONDENSE_PROMPT && request.history.at(-1)!.content.includes(userMemory('101')))).toBe(true);
  }, 60_000);

  it.each(ROUTING_MODES)(
    'keeps the conversations of the asking agent apart in the agent it asks: a question from a direct chat, then one from a group (helper %s)',
    async (helperMode) => {
      await check({
        mode: 'per-peer',
        helperMode,
        messages: [
          { person: '101', where: 'dm', delegate: true, next: 'all' },
          { person: '101', where: '-100', delegate: true, next: 'all' },
        ],
      });
    },
    60_000,
  );
});
