import { afterEach, describe, expect, it } from 'vitest';
import { parseMessageContent } from '../core/message.js';
import { echoToolStep, peerThread, settle, startSystem, until, type System } from './support.js';

/**
 * The Discord channel end to end: a direct message on the fake Discord's gateway goes through
 * the real xgw, notifier, agent run and pai (the fake model), and the agent's answer comes back
 * through the Discord REST API, once, quoting the message.
 */

let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

describe('discord end to end', () => {
  it("answers a Discord direct message with the agent's reply, once, in the peer's DM channel", async () => {
    system = await startSystem({ llm: { defaultStep: echoToolStep }, discord: true });
    const discord = system.discord!;
    expect((await system.xgwStatus()).channels).toContainEqual(expect.objectContaining({ id: 'discord:main', state: 'running' }));

    const message = discord.queueMessage({ from: '4242', text: 'hello from discord' });
    const reply = await until(() => discord.sent.find((sent) => sent.content === 'reply to: hello from discord'), 'the reply on Discord', 60_000);
    expect(reply.channel_id).toBe(discord.dmChannel('4242'));
    expect(reply.message_reference?.message_id).toBe(message.id);

    await settle(system);
    expect(discord.sent).toHaveLength(1);
    const events = system.events(peerThread(system.home, 'discord', '4242'));
    const inbound = events.filter((e) => e.type === 'message' && e.source !== 'self');
    expect(inbound.map((e) => [e.source, parseMessageContent(e.content).text])).toEqual([['external:discord:main:dm:4242:4242', 'hello from discord']]);
    // The bot token is a secret: the model's commands run without it.
    discord.queueMessage({ from: '4242', text: '$E2E_DISCORD_TOKEN' });
    await until(() => discord.sent.length === 2, 'the second reply', 60_000);
    const toolcalls = system.events(peerThread(system.home, 'discord', '4242')).filter((e) => e.subtype === 'toolcall');
    expect(toolcalls.map((e) => (JSON.parse(e.content) as { output: string }).output)).toEqual(['handled-hello from discord\n', 'handled-\n']);
  });
});
