import type { ChannelAdapter } from '../channel.js';
import type { ChannelConfig } from '../types.js';
import { TerminalChannel } from './terminal.js';

/**
 * Builds the adapter for a configured channel. Web chat, Telegram, Discord and Slack are imported
 * only when configured: their libraries (ws, grammY, discord.js, @slack/bolt) cost start-up time and memory.
 */
export async function createChannel(config: ChannelConfig, env: NodeJS.ProcessEnv): Promise<ChannelAdapter> {
  switch (config.type) {
    case 'webchat':
      return (await import('./webchat.js')).createWebchatChannel(config);
    case 'telegram':
      return (await import('./telegram.js')).createTelegramChannel(config, env);
    case 'discord':
      return (await import('./discord.js')).createDiscordChannel(config, env);
    case 'terminal':
      return new TerminalChannel(config);
    case 'api':
      return (await import('./api.js')).createApiChannel(config, env);
    case 'slack':
      return (await import('./slack.js')).createSlackChannel(config, env);
  }
}
