import type { ImapFlow } from 'imapflow';
import type { Transporter } from 'nodemailer';
import { ClawError, isClawError } from '../../core/errors.js';
import { backoffMs, sleep } from '../../core/retry.js';
import { settleWithin } from '../settle.js';
import { readMail, toInboundMail } from './email-inbound.js';
import { parseMessageIds, replySubject, replyThreading, type MailThreading } from './email-thread.js';
import { receiveWithRetries } from './inbound-retry.js';
import { createTokenRedactor } from './token-redactor.js';
import type { ChannelAdapter, ChannelContext } from '../channel.js';
import type { ChannelSendOptions, ChannelStatus, EmailChannelConfig, InboundFile, OutboundFile, OutboundMessage } from '../types.js';

export interface EmailChannelOptions {
  /** Hear of new mail through IMAP IDLE; false: only the poll every `poll_interval_seconds` (as with a server without IDLE). Default: true. */
  idle?: boolean;
  /** Delay before a lost IMAP connection is made again; doubles per failure. Default: 1000 (1 s). */
  retryDelayMs?: number;
  /** Cap of that delay. Default: 60000 (1 minute). */
  maxRetryDelayMs?: number;
  /** Delay before a mail the gateway could not take is handed to it again; doubles per failure, up to 5 s. Default: 500. */
  receiveRetryDelayMs?: number;
}

/** How long connecting to, and one answer of, a mail server may take. */
const SERVER_TIMEOUT_MS = 30_000;
/** How long the IMAP connection rests after a command before it IDLEs again. */
const AUTO_IDLE_DELAY_MS = 500;
/** How long `stop` waits for the mail being read and the IMAP logout. */
const STOP_GRACE_MS = 5_000;

/**
 * The mail libraries, loaded when the channel starts (after xgw listens), not when xgw builds it:
 * imapflow alone takes seconds to load on a loaded machine, and xgw must answer its start in 10.
 */
async function loadLibraries(): Promise<{ ImapFlow: typeof ImapFlow; createTransport: typeof import('nodemailer').createTransport }> {
  const [{ ImapFlow }, { createTransport }] = await Promise.all([import('imapflow'), import('nodemailer')]);
  return { ImapFlow, createTransport };
}

/** The default ports by security: IMAP and SMTP. */
const PORTS = { implicit: [993, 465], starttls: [143, 587], none: [143, 25] } as const;

/**
 * The e-mail channel: imapflow reads the channel's folder (IMAP IDLE for news, and a poll as the
 * fallback), nodemailer sends over SMTP. A mail is marked \Seen only once the gateway has taken
 * it (the inbox push is durable, or it was refused): a mail read again after a restart is a
 * duplicate of its inbox event (its Message-ID is the key), never lost. An answer replies to the
 * mail it answers, looked up in the folder: `Re:` its subject, In-Reply-To and References set,
 * nothing quoted, the agent's files attached. The password is read from `env[password_env]`
 * here and never leaves this module.
 */
export function createEmailChannel(config: EmailChannelConfig, env: NodeJS.ProcessEnv, options: EmailChannelOptions = {}): ChannelAdapter {
  return new EmailChannel(config, env, options);
}

class EmailChannel implements ChannelAdapter {
  readonly type = 'email' as const;
  private imap: ImapFlow | undefined;
  private smtp: Transporter | undefined;
  private context: ChannelContext | undefined;
  /** Aborted by `stop`: reconnecting, receive retries and the scan under way. */
  private lifetime = new AbortController();
  private state: ChannelStatus['state'] = 'stopped';
  private problem: string | undefined;
  private poll: NodeJS.Timeout | undefined;
  /** The scan of the folder under way; `rescan`: news came while it ran. */
  private scanning: Promise<void> | undefined;
  private rescan = false;
  /** Mails the gateway could not take (logged), by UID: tried again at the next start, not at each scan. */
  private readonly givenUp = new Set<number>();
  /** The bytes of the files of the mail being handed to the gateway (see `download`). */
  private files = new Map<string, Buffer>();
  private readonly password: string;
  private readonly redact: (text: string) => string;
  private readonly user: string;
  private libraries: Awaited<ReturnType<typeof loadLibraries>> | undefined;

  constructor(
    private readonly config: EmailChannelConfig,
    env: NodeJS.ProcessEnv,
    private readonly options: EmailChannelOptions,
  ) {
    const password = env[config.password_env];
    if (!password)
      throw new ClawError('invalid', `${config.password_env} is not set`, { suggestion: `export the password of the mail account ${config.user ?? config.address} as ${config.password_env}` });
    this.password = password;
    this.redact = createTokenRedactor(password);
    this.user = config.user ?? config.address;
  }

  get id(): string {
    return this.config.id;
  }

  async start(context: ChannelContext): Promise<void> {
    if (this.imap || this.smtp) throw new ClawError('conflict', `${this.id} is running already`, { suggestion: 'stop it first' });
    this.context = context;
    this.lifetime = new AbortController();
    this.setState('starting');
    try {
      this.libraries ??= await loadLibraries();
      this.smtp = this.createSmtp();
      // The login is tried now, not at the first answer.
      await this.smtp.verify();
      await this.connect();
      if (this.lifetime.signal.aborted) throw new ClawError('aborted', `${this.id} was stopped while starting`, { suggestion: 'start it again with: xgw start' });
    } catch (error) {
      await this.shutdown();
      const failure = this.toClawError(error);
      this.setState(failure.kind === 'aborted' ? 'stopped' : 'error', failure.message);
      throw failure;
    }
    this.setState('running');
    this.poll = setInterval(() => this.requestScan(), this.config.poll_interval_seconds * 1000);
    this.requestScan();
    const { host } = this.config.imap;
    context.logger.info(`${this.id}: reading ${this.config.folder} of ${this.user} at ${host}${this.options.idle === false ? '' : ' (IDLE)'}, every ${this.config.poll_interval_seconds} s besides`);
  }

  async send(message: OutboundMessage, options: ChannelSendOptions = {}): Promise<{ messageIds: string[] }> {
    // An answer is one mail, its files attached: sent already if an earlier attempt recorded it.
    if (options.sent?.length) return { messageIds: [...options.sent] };
    if (!this.smtp || this.state === 'stopped') throw new ClawError('io', `${this.id} is not running`, { suggestion: 'see its state with: xgw status' });
    const original = await this.findOriginal(message.replyTo ?? message.conversationId, message.conversationId);
    if (options.signal?.aborted) throw new ClawError('aborted', `sending to ${this.id} was aborted`);
    const messageId = await this.sendMail(message.peerId, message.text, original, message.files, message.agent);
    options.onPart?.([messageId]);
    return { messageIds: [messageId] };
  }

  /** A file of the mail being handed to the gateway: its bytes came with the mail. */
  async download(file: InboundFile, maxBytes: number): Promise<Buffer> {
    const bytes = this.files.get(file.ref);
    if (!bytes) throw new ClawError('io', `${this.id} has no file ${file.ref} of the mail at hand`);
    if (bytes.length > maxBytes) throw new ClawError('usage', `the file is larger than ${maxBytes} bytes`, { suggestion: 'raise media.max_bytes in the xgw config' });
    return bytes;
  }

  status(): ChannelStatus {
    const detail = [this.config.address, this.problem].filter(Boolean).join(': ');
    return { id: this.id, type: this.type, state: this.state, detail };
  }

  /** Logs in to both servers and opens the folder, as `start` does, then leaves. */
  async check(): Promise<string> {
    this.libraries ??= await loadLibraries();
    const smtp = this.createSmtp();
    const imap = this.createImap();
    imap.on('error', () => {}); // reported by the failing call
    try {
      await smtp.verify();
      await imap.connect();
      await imap.mailboxOpen(this.config.folder, { readOnly: true });
      return `${this.user} at ${this.config.imap.host}`;
    } catch (error) {
      throw this.toClawError(error);
    } finally {
      smtp.close();
      await settleWithin(
        imap.logout().catch(() => imap.close()),
        STOP_GRACE_MS,
      );
    }
  }

  async stop(): Promise<void> {
    const running = this.imap !== undefined || this.smtp !== undefined;
    await this.shutdown();
    if (running) this.context?.logger.info(`${this.id}: stopped`);
    this.setState('stopped');
  }

  private async shutdown(): Promise<void> {
    this.lifetime.abort();
    clearInterval(this.poll);
    this.poll = undefined;
    const imap = this.imap;
    this.imap = undefined;
    await settleWithin(Promise.allSettled([this.scanning, imap?.logout()]), STOP_GRACE_MS);
    imap?.close();
    this.smtp?.close();
    this.smtp = undefined;
  }

  private createImap(): ImapFlow {
    const { host, port, tls } = this.config.imap;
    return new this.libraries!.ImapFlow({
      host,
      port: port ?? PORTS[tls][0],
      secure: tls === 'implicit',
      doSTARTTLS: tls === 'starttls' ? true : tls === 'none' ? false : undefined,
      auth: { user: this.user, pass: this.password },
      logger: false,
      disableAutoIdle: this.options.idle === false,
      // IDLE soon after each command (imapflow waits 15 s): until it runs, new mail goes unheard.
      autoIdleDelay: AUTO_IDLE_DELAY_MS,
      connectionTimeout: SERVER_TIMEOUT_MS,
      greetingTimeout: SERVER_TIMEOUT_MS,
    });
  }

  private createSmtp(): Transporter {
    const { host, port, tls } = this.config.smtp;
    return this.libraries!.createTransport({
      host,
      port: port ?? PORTS[tls][1],
      secure: tls === 'implicit',
      requireTLS: tls === 'starttls',
      ignoreTLS: tls === 'none',
      auth: { user: this.user, pass: this.password },
      connectionTimeout: SERVER_TIMEOUT_MS,
      greetingTimeout: SERVER_TIMEOUT_MS,
      socketTimeout: SERVER_TIMEOUT_MS,
    });
  }

  /** Logs in to the IMAP server and opens the folder; a lost connection is made again (`reconnect`). */
  private async connect(): Promise<void> {
    const client = this.createImap();
    // imapflow emits `error` before `close`; the close is what is acted on.
    client.on('error', (error: unknown) => this.context?.logger.debug(`${this.id}: IMAP: ${this.describe(error)}`));
    try {
      await client.connect();
      await client.mailboxOpen(this.config.folder);
    } catch (error) {
      client.close();
      throw error;
    }
    client.on('exists', () => this.requestScan());
    client.on('close', () => this.connectionLost(client));
    this.imap = client;
  }

  private connectionLost(client: ImapFlow): void {
    if (this.imap !== client || this.lifetime.signal.aborted) return;
    this.imap = undefined;
    this.setState('error', 'the IMAP connection was lost; reconnecting');
    this.context?.logger.warn(`${this.id}: the IMAP connection was lost; reconnecting`);
    void this.reconnect();
  }

  private async reconnect(): Promise<void> {
    const { signal } = this.lifetime;
    for (let attempt = 1; !signal.aborted; attempt++) {
      try {
        await sleep(backoffMs(attempt, { initialMs: this.options.retryDelayMs ?? 1000, maxMs: this.options.maxRetryDelayMs ?? 60_000 }), signal);
        await this.connect();
        this.setState('running');
        this.context?.logger.info(`${this.id}: the IMAP connection works again`);
        this.requestScan();
        return;
      } catch (error) {
        if (signal.aborted) return;
        this.setState('error', `cannot reach the IMAP server: ${this.describe(error)}; retrying`);
        this.context?.logger.debug(`${this.id}: reconnecting failed: ${this.describe(error)}`);
      }
    }
  }

  /** Reads the folder's unseen mail now, or after the scan under way. */
  private requestScan(): void {
    if (this.scanning) {
      this.rescan = true;
      return;
    }
    this.scanning = this.scanWhileNews().finally(() => (this.scanning = undefined));
  }

  private async scanWhileNews(): Promise<void> {
    do {
      this.rescan = false;
      try {
        await this.scan();
      } catch (error) {
        if (!this.lifetime.signal.aborted) this.context?.logger.warn(`${this.id}: reading ${this.config.folder} failed: ${this.describe(error)}`);
      }
    } while (this.rescan && !this.lifetime.signal.aborted);
  }

  /** Hands each unseen mail to the gateway, oldest first, and marks it \Seen once it was taken. */
  private async scan(): Promise<void> {
    const client = this.imap;
    if (!client?.usable) return;
    // A SEARCH sees only the mail the connection has been told of: NOOP asks the server for news first.
    await client.noop();
    const uids = (await client.search({ seen: false }, { uid: true })) || [];
    for (const uid of uids.sort((a, b) => a - b)) {
      if (this.lifetime.signal.aborted || this.imap !== client) return;
      if (this.givenUp.has(uid)) continue;
      const fetched = await client.fetchOne(String(uid), { source: true }, { uid: true });
      if (fetched === false || fetched.source === undefined) continue;
      if (await this.take(uid, fetched.source)) await client.messageFlagsAdd(String(uid), ['\\Seen'], { uid: true });
      else if (!this.lifetime.signal.aborted) this.givenUp.add(uid);
    }
  }

  /** Hands one mail (UID `uid`) to the gateway and tells the sender what it must: whether the mail is done with. */
  private async take(uid: number, source: Buffer): Promise<boolean> {
    const context = this.context!;
    let mail: Awaited<ReturnType<typeof readMail>>;
    try {
      mail = await readMail(source);
    } catch (error) {
      context.logger.error(`${this.id}: cannot read mail ${uid} of ${this.config.folder} (${this.describe(error)}); it stays unseen`);
      return false;
    }
    const inbound = toInboundMail(mail, this.config);
    if ('ignored' in inbound) {
      context.logger.info(`${this.id}: ignored mail ${mail.messageId} from ${JSON.stringify(mail.from)}: ${inbound.ignored}`);
      return true;
    }
    this.files = inbound.files;
    const outcome = await receiveWithRetries(context, inbound.message, {
      channelId: this.id,
      describe: (error) => this.describe(error),
      signal: this.lifetime.signal,
      initialDelayMs: this.options.receiveRetryDelayMs ?? 500,
    }).finally(() => (this.files = new Map()));
    if (!outcome) return false;
    const notice = context.noticeFor(outcome);
    if (notice) {
      try {
        await this.sendMail(mail.from, notice, mail);
      } catch (error) {
        context.logger.warn(`${this.id}: could not tell ${JSON.stringify(mail.from)} about ${outcome.kind}: ${this.describe(error)}`);
      }
    }
    return true;
  }

  /**
   * The mail an answer replies to, by its Message-ID (`target`), from the folder. One no longer
   * there is answered in its thread all the same (`root`), without its subject.
   */
  private async findOriginal(target: string, root: string): Promise<(MailThreading & { subject: string }) | undefined> {
    if (parseMessageIds(target)[0] !== target) return undefined;
    const client = this.imap;
    if (!client?.usable) throw new ClawError('io', `${this.id} is not connected to its IMAP server`, { suggestion: 'see its state with: xgw status' });
    const uids = (await client.search({ header: { 'message-id': target } }, { uid: true })) || [];
    const uid = uids.at(-1);
    const found = uid === undefined ? false : await client.fetchOne(String(uid), { envelope: true, headers: ['references'] }, { uid: true });
    if (!found) return { messageId: target, references: root !== target && parseMessageIds(root)[0] === root ? [root] : [], subject: '' };
    const references = parseMessageIds(found.headers?.toString('utf8').replace(/^references:/i, ''));
    const inReplyTo = parseMessageIds(found.envelope?.inReplyTo)[0];
    return { messageId: target, references, ...(inReplyTo ? { inReplyTo } : {}), subject: found.envelope?.subject ?? '' };
  }

  /** Sends a mail to `to`, in the thread of `original` where there is one; its Message-ID. */
  private async sendMail(to: string, text: string, original: (MailThreading & { subject: string }) | undefined, files: readonly OutboundFile[] = [], agent?: string): Promise<string> {
    const smtp = this.smtp;
    if (!smtp) throw new ClawError('io', `${this.id} is not running`, { suggestion: 'see its state with: xgw status' });
    const { address, name } = this.config;
    const threading = original && replyThreading(original);
    try {
      const info = await smtp.sendMail({
        from: name ? { name, address } : address,
        to,
        subject: original ? replySubject(original.subject) : `A message from ${name ?? agent ?? address}`,
        text,
        ...(threading ? { inReplyTo: threading.inReplyTo, references: threading.references } : {}),
        // RFC 3834: a program wrote it, so vacation responders leave it unanswered (no mail loop).
        headers: { 'Auto-Submitted': original ? 'auto-replied' : 'auto-generated' },
        attachments: files.map((file) => ({ filename: file.name, path: file.path, ...(file.mime_type ? { contentType: file.mime_type } : {}) })),
      });
      return String(info.messageId);
    } catch (error) {
      throw this.toClawError(error);
    }
  }

  private setState(state: ChannelStatus['state'], problem?: string): void {
    this.state = state;
    this.problem = problem === undefined ? undefined : this.redact(problem);
  }

  /** An error as one line, with the server's own words where it gave some, without the password. */
  private describe(error: unknown): string {
    if (!(error instanceof Error)) return this.redact(String(error));
    const said = (error as { responseText?: string; response?: string }).responseText ?? (error as { response?: string }).response;
    return this.redact(said && !error.message.includes(said) ? `${error.message} (${said})` : error.message);
  }

  /** The ClawError for a failed login, connection or command: a refused login is `invalid` (retrying cannot fix it). */
  private toClawError(error: unknown): ClawError {
    if (isClawError(error)) return error;
    const failure = error as { authenticationFailed?: boolean; code?: string; serverResponseCode?: string };
    const what = this.describe(error);
    if (failure.authenticationFailed || failure.code === 'EAUTH') {
      return new ClawError('invalid', `the mail server refused the login of ${this.user}: ${what}`, { suggestion: `check user and the password in ${this.config.password_env}` });
    }
    if (failure.serverResponseCode === 'NONEXISTENT') {
      return new ClawError('invalid', `the IMAP server has no folder ${this.config.folder}: ${what}`, { suggestion: 'create the folder, or set folder in the xgw config' });
    }
    return new ClawError('upstream', `the mail server failed: ${what}`, { suggestion: 'check host, port and tls of imap and smtp in the xgw config; retry later' });
  }
}
