import { userInfo } from 'node:os';
import { daemonLogFile, runDaemon } from '../core/daemon.js';
import { ClawError, usageError } from '../core/errors.js';
import { SocketStream } from '../core/ipc.js';
import { createLogger } from '../core/logger.js';
import { createChannel } from './channels/index.js';
import { TerminalChannel } from './channels/terminal.js';
import { loadXgwConfig } from './config.js';
import { Gateway, noticeFor } from './gateway.js';
import { GatewayState } from './state.js';
import type { XgwRequest, XgwStatus } from './protocol.js';

/**
 * Runs the gateway in this process until `stop` or SIGTERM: every configured channel, and the
 * control socket that `xgw send`, `xgw status` and terminal chats talk to.
 */
export async function runXgw(home: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const config = loadXgwConfig(home);
  await runDaemon(home, 'xgw', async () => {
    const logger = createLogger(daemonLogFile(home, 'xgw'), { env });
    const state = new GatewayState(home);
    const gateway = new Gateway({ home, config, state, logger });
    const startedAt = new Date();
    try {
      for (const channelConfig of config.channels) {
        const channel = await createChannel(channelConfig, env);
        try {
          await gateway.startChannel(channel);
        } catch (error) {
          // A configuration mistake stops the start with its message; anything else (a platform
          // that cannot be reached now) leaves the channel in the error state, to recover.
          if (error instanceof ClawError && (error.kind === 'invalid' || error.kind === 'usage')) throw error;
          logger.error(`${channel.id} failed to start: ${(error as Error).message}`);
        }
      }
    } catch (error) {
      await Promise.allSettled(gateway.channelList().map((channel) => channel.stop()));
      state.close();
      throw error;
    }
    logger.info(`xgw started (pid ${process.pid}; channels: ${config.channels.map((c) => c.id).join(', ') || 'none'})`);

    const terminal = (id: string): TerminalChannel => {
      const channel = gateway.channelList().find((c) => c.id === id);
      if (!(channel instanceof TerminalChannel)) {
        throw new ClawError('not_found', `no terminal channel ${id} is configured`, { suggestion: 'add { id: terminal:local, type: terminal, access: open } to the xgw config' });
      }
      return channel;
    };

    return {
      async handle(request) {
        const message = request as XgwRequest;
        switch (message.op) {
          case 'status':
            return {
              running: true,
              pid: process.pid,
              started_at: startedAt.toISOString(),
              uptime_seconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
              channels: gateway.channelList().map((channel) => channel.status()),
              routes: config.routes,
              pending_pairings: state.pendingPairings().length,
            } satisfies XgwStatus;
          case 'send':
            return gateway.send({
              channel: message.channel,
              peer: message.peer,
              conversationType: message.conversation_type,
              conversation: message.conversation,
              replyTo: message.reply_to,
              idempotencyKey: message.idempotency_key,
              text: message.text,
            });
          case 'chat_message': {
            const channel = terminal(message.channel);
            const peer = message.peer ?? userInfo().username;
            const outcome = await gateway.receive(
              { channelId: channel.id, conversationType: 'dm', conversationId: peer, peerId: peer, messageId: message.message_id, text: message.text },
              message.agent,
            );
            const notice = noticeFor(outcome);
            if (notice) channel.notify(peer, notice);
            return outcome;
          }
          case 'chat_attach': {
            const channel = terminal(message.channel);
            const peer = message.peer ?? userInfo().username;
            return new SocketStream((send, closed) => {
              const detach = channel.attach(peer, (entry) => send(entry));
              closed.addEventListener('abort', detach, { once: true });
            });
          }
          default:
            throw usageError(`unknown request ${JSON.stringify(request)}`, 'see src/xgw/protocol.ts for the requests xgw answers');
        }
      },
      async shutdown() {
        await Promise.allSettled(gateway.channelList().map((channel) => channel.stop()));
        state.close();
        logger.info(`xgw stopped (pid ${process.pid})`);
      },
    };
  });
}
