import { runDaemon } from '../core/daemon.js';
import { daemonLogFile } from '../core/layout.js';
import { ClawError, usageError } from '../core/errors.js';
import { SocketStream } from '../core/ipc.js';
import { createLogger } from '../core/logger.js';
import { createChannel } from './channels/index.js';
import { defaultTerminalPeer, TerminalChannel } from './channels/terminal.js';
import { configError, describeFinding, inspectXgwConfig, loadXgwConfigFile, runningXgwEnvironment } from './config.js';
import { Gateway } from './gateway.js';
import { noticeFor } from './notices.js';
import { openThreadStore, wakeNotifier, type ThreadStore } from '../thread/index.js';
import { GatewayState } from './state.js';
import { ChannelOwnership } from './ownership.js';
import { hostName } from '../core/host.js';
import { createSystemStatusSource } from './system-status.js';
import { createControlSource } from './control-source.js';
import type { XgwReloadResult, XgwRequest, XgwStatus } from './protocol.js';
import type { ChannelAdapter } from './channel.js';

/** How long `status` with `wait_ms` may wait for channels still in their first start. */
const MAX_STATUS_WAIT_MS = 10_000;

/**
 * Runs the gateway in this process until `stop` or SIGTERM: every configured channel, and the
 * control socket that `xgw send`, `xgw status` and terminal chats talk to. The socket answers
 * first; channels start after it, each bounded in time and tried again in the background while
 * it fails (see ChannelSupervisor). A channel that cannot even be built (a token variable that
 * is not set) fails the start.
 */
export async function runXgw(home: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const loaded = loadXgwConfigFile(home);
  const { config } = loaded;
  /** The fingerprint of the config text in force (see XgwStatus). */
  let configSha256 = loaded.sha256;
  await runDaemon(home, 'xgw', async () => {
    const logger = createLogger(daemonLogFile(home, 'xgw'), { env });
    const state = new GatewayState(home);
    let store: ThreadStore;
    try {
      store = await openThreadStore(home, env);
    } catch (error) {
      state.close();
      throw error;
    }
    // Hosts sharing a PostgreSQL store: each channel is served by the gateway that owns it.
    const ownership = store.kind === 'postgres' ? new ChannelOwnership(store.placements, hostName(home, env), home, logger, config.channel_claim_seconds) : null;
    const gateway = new Gateway({
      home,
      config,
      state,
      logger,
      store,
      ...(ownership && { ownership }),
      systemStatus: createSystemStatusSource(home, env),
      control: createControlSource(home, env),
    });
    const startedAt = new Date();
    let channels: ChannelAdapter[];
    try {
      channels = await Promise.all(config.channels.map((channelConfig) => createChannel(channelConfig, env)));
      // Claimed before the channels launch, which start only those this gateway owns.
      await ownership?.start({ channelIds: () => gateway.currentConfig.channels.map((c) => c.id), gained: (id) => gateway.takeOver(id), lost: (id) => gateway.standBy(id) });
    } catch (error) {
      state.close();
      await store.close();
      throw error;
    }
    logger.info(`xgw started (pid ${process.pid}; channels: ${config.channels.map((c) => c.id).join(', ') || 'none'})`);
    for (const warning of loaded.warnings) logger.warn(`config: ${describeFinding(warning)}`);

    const terminal = (id: string): TerminalChannel => {
      const channel = gateway.channelList().find((c) => c.id === id);
      if (!(channel instanceof TerminalChannel)) {
        throw new ClawError('not_found', `no terminal channel ${id} is configured`, { suggestion: 'add { id: terminal:local, type: terminal, access: open } to the xgw config' });
      }
      return channel;
    };

    return {
      listening() {
        for (const channel of channels) void gateway.launchChannel(channel);

        // Replies that failed while the gateway was away wait out notifier's backoff (minutes,
        // after a long outage); once the channels are up they may go at once.
        void gateway.launched(MAX_STATUS_WAIT_MS).then(() => {
          void wakeNotifier(home);
          return gateway.welcomeApproved();
        });
      },
      async handle(request) {
        const message = request as XgwRequest;
        switch (message.op) {
          case 'status':
            if (message.wait_ms) await gateway.launched(Math.min(message.wait_ms, MAX_STATUS_WAIT_MS));
            return {
              running: true,
              pid: process.pid,
              started_at: startedAt.toISOString(),
              uptime_seconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
              channels: gateway.channelStatuses(),
              routes: gateway.currentConfig.routes,
              pending_pairings: state.pendingPairings().length,
              config_sha256: configSha256,
            } satisfies XgwStatus;
          case 'reload': {
            // Checked as xgw config check checks it, in this process's environment (which builds the channels).
            const report = inspectXgwConfig(home, { environment: runningXgwEnvironment(env) });
            if (!report.config) {
              logger.warn(`reload refused, the running config kept: ${configError(report).message}`);
              throw configError(report);
            }
            const changes = await gateway.reconfigure(report.config, (channel) => createChannel(channel, env), MAX_STATUS_WAIT_MS);
            configSha256 = report.sha256;
            for (const warning of report.findings) logger.warn(`config: ${describeFinding(warning)}`);
            return { ...changes, file: report.file, channels: gateway.channelStatuses(), warnings: report.findings, config_sha256: configSha256 } satisfies XgwReloadResult;
          }
          case 'send':
            return gateway.send({
              channel: message.channel,
              peer: message.peer,
              conversationType: message.conversation_type,
              conversation: message.conversation,
              replyTo: message.reply_to,
              idempotencyKey: message.idempotency_key,
              text: message.text,
              notice: message.notice,
              files: message.files,
              agent: message.agent,
            });
          case 'typing':
            gateway.typing(message.channel, { peerId: message.peer, conversationType: message.conversation_type, conversationId: message.conversation });
            return null;
          case 'draft':
            gateway.draft(message.channel, { peerId: message.peer, conversationType: message.conversation_type, conversationId: message.conversation }, message.reply_to, message.text);
            return null;
          case 'tool_progress':
            gateway.toolProgress(message.channel, { peerId: message.peer, conversationType: message.conversation_type, conversationId: message.conversation }, message.reply_to, message.command);
            return null;
          case 'welcome':
            await gateway.welcomeApproved();
            return null;
          case 'chat_message': {
            const channel = terminal(message.channel);
            const peer = message.peer ?? defaultTerminalPeer();
            const outcome = await gateway.receive(
              { channelId: channel.id, conversationType: 'dm', conversationId: peer, peerId: peer, messageId: message.message_id, text: message.text },
              message.agent,
            );
            const agent = outcome.kind === 'accepted' ? outcome.agent : message.agent;
            if (outcome.kind === 'accepted' && !outcome.duplicate) channel.said(peer, agent, message.message_id, message.text);
            const notice = noticeFor(outcome);
            if (notice) channel.notify(peer, agent, notice);
            return outcome;
          }
          case 'chat_attach': {
            const channel = terminal(message.channel);
            const peer = message.peer ?? defaultTerminalPeer();
            return new SocketStream((send, closed) => {
              const detach = channel.attach(peer, message.agent, (entry) => send(entry));
              closed.addEventListener('abort', detach, { once: true });
            });
          }
          default:
            throw usageError(`unknown request ${JSON.stringify(request)}`, 'see src/xgw/protocol.ts for the requests xgw answers');
        }
      },
      async shutdown() {
        await gateway.stopChannels();
        await ownership?.stop();
        state.close();
        await store.close();
        logger.info(`xgw stopped (pid ${process.pid})`);
      },
    };
  });
}
