import { describe, expect, it } from 'vitest';
import { XgwConfigSchema, type ChannelStatus, type XgwStatus } from '../xgw/index.js';
import { talkLines, talkTo } from './up-summary.js';

// What theclaw up says about where to talk to whom; theclaw.test.ts runs it against a real system.

const config = XgwConfigSchema.parse({
  channels: [
    { id: 'webchat:main', type: 'webchat', port: 18790, access: 'open' },
    { id: 'webchat:guest', type: 'webchat', port: 18791, access: 'pairing' },
    { id: 'webchat:lost', type: 'webchat', port: 18792, access: 'open' },
    { id: 'terminal:local', type: 'terminal', access: 'open' },
  ],
  routes: [
    { channel: 'webchat:guest', agent: 'helper' },
    { channel: 'webchat:main', agent: 'admin' },
    { channel: 'terminal:local', agent: 'admin' },
  ],
});

function status(channels: ChannelStatus[]): XgwStatus {
  return { running: true, pid: 1, started_at: null, uptime_seconds: 0, channels, routes: config.routes, pending_pairings: 0, config_sha256: null };
}

const running: ChannelStatus[] = [
  { id: 'webchat:main', type: 'webchat', state: 'running', url: 'http://127.0.0.1:18790/?token=aa' },
  { id: 'webchat:guest', type: 'webchat', state: 'running', url: 'http://127.0.0.1:18791/?token=bb' },
  { id: 'webchat:lost', type: 'webchat', state: 'running', url: 'http://127.0.0.1:18792/?token=cc' },
  { id: 'terminal:local', type: 'terminal', state: 'running' },
];
const agents = ['admin', 'warden', 'maintainer', 'evolver', 'helper', 'writer'];

describe('talkTo', () => {
  it("lists each web chat under the agent its route goes to, the status page only for the owner's open one, and every agent of the owner's", () => {
    expect(talkLines(talkTo(status(running), config.channels, agents))).toEqual([
      'Talk to admin:',
      '  web chat  http://127.0.0.1:18790/?token=aa',
      '  status    http://127.0.0.1:18790/status?token=aa',
      '  terminal  agent chat admin',
      'Talk to helper:',
      '  web chat  http://127.0.0.1:18791/?token=bb',
      '  terminal  agent chat helper',
      'Talk to writer:',
      '  terminal  agent chat writer',
      'No route (messages get a notice; add one with xgw route add):',
      '  web chat  http://127.0.0.1:18792/?token=cc',
      '  status    http://127.0.0.1:18792/status?token=cc',
    ]);
  });

  it('names no terminal without a terminal channel, and says when there is nowhere to talk', () => {
    const webOnly = running.filter((channel) => channel.id === 'webchat:guest');
    expect(talkLines(talkTo(status(webOnly), config.channels, agents))).toEqual(['Talk to helper:', '  web chat  http://127.0.0.1:18791/?token=bb']);
    expect(talkLines(talkTo(status([]), config.channels, agents))).toEqual(['No web chat or terminal channel is configured: see xgw config check']);
  });

  it("offers no terminal chat with an agent of another host (its replies go out on that host's terminal)", () => {
    const here = running.filter((channel) => channel.id === 'terminal:local');
    expect(talkLines(talkTo(status(here), config.channels, ['helper']))).toEqual(['Talk to helper:', '  terminal  agent chat helper']);
    expect(talkLines(talkTo(status(here), config.channels, []), true)).toEqual([
      'No agent of yours runs on this host: create one here with agent init <id> && agent start <id>, or talk to them on their host',
    ]);
  });
});
