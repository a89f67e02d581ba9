import { SYSTEM_AGENTS } from '../agent/identity.js';
import { channelAgent, servesStatusPage } from '../xgw/config.js';
import type { ChannelConfig, XgwStatus } from '../xgw/index.js';

/** Where a person talks to one agent, as `theclaw up` lists it. */
export interface TalkTo {
  /** Null: web chats with no route, whose messages get a notice instead. */
  agent: string | null;
  /** `status_url` only for a web chat that serves the status page (the owner's: access open). */
  web_chats: { id: string; url: string; status_url?: string }[];
  /** The command that opens the terminal chat with it, where a terminal channel runs. */
  terminal?: string;
}

/**
 * Where to talk to whom: admin and every agent of the owner's (not the system's reporting
 * agents), and whichever agent a web chat's route goes to, each with its web chats; the terminal
 * reaches any agent of this host by name (`agents`: another host's answer on its own terminal).
 * `configured` says which web chat serves `/status`.
 */
export function talkTo(xgw: XgwStatus, configured: readonly ChannelConfig[], agents: readonly string[]): TalkTo[] {
  const terminal = xgw.channels.some((channel) => channel.type === 'terminal');
  const sections = new Map<string | null, TalkTo>();
  const section = (agent: string | null) => {
    const found = sections.get(agent) ?? { agent, web_chats: [], ...(terminal && agent !== null && { terminal: `agent chat ${agent}` }) };
    sections.set(agent, found);
    return found;
  };
  if (terminal) for (const agent of agents.filter((id) => id === 'admin' || !(id in SYSTEM_AGENTS))) section(agent);
  for (const channel of xgw.channels) {
    if (!channel.url) continue;
    const config = configured.find((c) => c.id === channel.id);
    const status = config?.type === 'webchat' && servesStatusPage(config) ? { status_url: statusPageUrl(channel.url) } : {};
    section(channelAgent(xgw.routes, channel.id) ?? null).web_chats.push({ id: channel.id, url: channel.url, ...status });
  }
  return [...sections.values()];
}

/** The status page is served by the web chat at /status, behind the same token. */
function statusPageUrl(webchatUrl: string): string {
  const url = new URL(webchatUrl);
  url.pathname = '/status';
  return url.toString();
}

/** The summary's lines for `talk`; `terminal`: a terminal channel runs (with no agent here to talk to, maybe). */
export function talkLines(talk: readonly TalkTo[], terminal = false): string[] {
  if (talk.length === 0 && terminal) return ['No agent of yours runs on this host: create one here with agent init <id> && agent start <id>, or talk to them on their host'];
  if (talk.length === 0) return ['No web chat or terminal channel is configured: see xgw config check'];
  return talk.flatMap((section) => [
    section.agent === null ? 'No route (messages get a notice; add one with xgw route add):' : `Talk to ${section.agent}:`,
    ...section.web_chats.flatMap((chat) => [`  web chat  ${chat.url}`, ...(chat.status_url ? [`  status    ${chat.status_url}`] : [])]),
    ...(section.terminal ? [`  terminal  ${section.terminal}`] : []),
  ]);
}
