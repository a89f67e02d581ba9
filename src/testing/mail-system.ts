import { freePort } from './free-port.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImapFlow } from 'imapflow';
import { createTransport, type SendMailOptions } from 'nodemailer';
import { waitFor } from './wait.js';

/**
 * A throwaway mail system on loopback for the e-mail channel's tests: Debian's Dovecot (IMAP)
 * and Postfix (SMTP, delivering into Dovecot's Maildirs), each with a config of its own in a
 * private directory — Maildir storage, a passwd-file of test users, ports picked free — run in
 * the foreground as children of the test and stopped after it. The servers need root (Postfix
 * starts as root and drops to its user; the mail is stored as Debian's `mail` user); `.ci/run`
 * installs them. Nothing of the system's own mail set-up is read or changed.
 */

export const DOVECOT = '/usr/sbin/dovecot';
export const POSTFIX = '/usr/sbin/postfix';
const POSTFIX_MASTER = '/usr/lib/postfix/sbin/master';

/** Why the mail servers cannot run here, or null when they can. */
export function mailSystemUnavailable(): string | null {
  if (!existsSync(DOVECOT) || !existsSync(POSTFIX_MASTER)) return 'needs dovecot-imapd and postfix (apt-get install dovecot-imapd postfix; .ci/run installs them)';
  if (process.getuid?.() !== 0) return 'needs root: Postfix starts as root';
  return null;
}

export interface MailSystem {
  /** The mail domain of the test users. */
  domain: string;
  host: '127.0.0.1';
  imapPort: number;
  smtpPort: number;
  address(user: string): string;
  password(user: string): string;
  /** Sends a mail from `user` through the SMTP server, logged in as `user`; its Message-ID. */
  send(user: string, mail: SendMailOptions): Promise<string>;
  /** Every mail in `user`'s INBOX, oldest first, with its flags. */
  inbox(user: string): Promise<StoredMail[]>;
  /** Takes \Seen off a mail of `user`'s INBOX (as if its reader had died before marking it). */
  markUnseen(user: string, messageId: string): Promise<void>;
  /** Stops both servers and removes the directory. */
  stop(): Promise<void>;
}

export interface StoredMail {
  uid: number;
  flags: string[];
  /** The mail's source. */
  source: string;
  /** Its headers, lower-case names, unfolded. */
  header(name: string): string | undefined;
}

const DOMAIN = 'example.test';

export async function startMailSystem(users: readonly string[]): Promise<MailSystem> {
  const unavailable = mailSystemUnavailable();
  if (unavailable) throw new Error(`the mail system ${unavailable}`);
  const dir = mkdtempSync(join(tmpdir(), 'theclaw-mail-'));
  // Postfix's and Dovecot's own users reach the sockets, maps and Maildirs inside.
  chmodSync(dir, 0o755);
  const mailUser = idOf('mail');
  const [imapPort, smtpPort] = [await freePort(), await freePort()];
  const passwords = new Map(users.map((user) => [user, `pw-${user}-${Math.random().toString(36).slice(2)}`]));
  const address = (user: string) => `${user}@${DOMAIN}`;
  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(children.map((child) => stopChild(child)));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const mail = join(dir, 'mail');
    mkdirSync(mail);
    chownSync(mail, mailUser.uid, mailUser.gid);
    writeFileSync(join(dir, 'users'), [...passwords].map(([user, password]) => `${address(user)}:{PLAIN}${password}\n`).join(''));
    chmodSync(join(dir, 'users'), 0o644); // dovecot's auth reads it as its own user, whatever the umask
    writeFileSync(join(dir, 'dovecot.conf'), dovecotConfig(dir, imapPort, mailUser));
    children.push(spawnServer(DOVECOT, ['-F', '-c', join(dir, 'dovecot.conf')], join(dir, 'dovecot.out')));
    const postfix = join(dir, 'postfix');
    mkdirSync(postfix);
    writeFileSync(join(postfix, 'main.cf'), postfixMain(dir, mailUser));
    writeFileSync(join(postfix, 'master.cf'), postfixMaster(smtpPort));
    writeFileSync(join(postfix, 'vmailbox'), users.map((user) => `${address(user)} ${user}/\n`).join(''));
    chmodSync(join(postfix, 'vmailbox'), 0o644);
    makePostfixQueue(dir);
    children.push(spawnServer(POSTFIX_MASTER, ['-c', postfix, '-s'], join(dir, 'postfix.out')));
    await waitFor(() => greets(imapPort, '* OK'), `Dovecot on port ${imapPort} (${join(dir, 'dovecot.log')})`, 20_000, 50);
    await waitFor(() => greets(smtpPort, '220'), `Postfix on port ${smtpPort}`, 20_000, 50);
  } catch (error) {
    const logs = ['dovecot.out', 'dovecot.log', 'postfix.out'].map((file) => (existsSync(join(dir, file)) ? `${file}:\n${readFileSync(join(dir, file), 'utf8')}` : '')).join('\n');
    await stop();
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${logs}`);
  }

  const imap = async <T>(user: string, work: (client: ImapFlow) => Promise<T>): Promise<T> => {
    const client = new ImapFlow({ host: '127.0.0.1', port: imapPort, secure: false, doSTARTTLS: false, auth: { user: address(user), pass: passwords.get(user)! }, logger: false });
    await client.connect();
    try {
      await client.mailboxOpen('INBOX');
      return await work(client);
    } finally {
      await client.logout();
    }
  };

  return {
    domain: DOMAIN,
    host: '127.0.0.1',
    imapPort,
    smtpPort,
    address,
    password: (user) => passwords.get(user)!,
    async send(user, mail) {
      const transport = createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true, auth: { user: address(user), pass: passwords.get(user)! } });
      try {
        return String((await transport.sendMail({ from: address(user), ...mail })).messageId);
      } finally {
        transport.close();
      }
    },
    inbox: (user) =>
      imap(user, async (client) => {
        const mails: StoredMail[] = [];
        for await (const message of client.fetch('1:*', { uid: true, flags: true, source: true })) {
          const source = message.source?.toString('utf8') ?? '';
          mails.push({ uid: message.uid, flags: [...(message.flags ?? [])], source, header: (name) => headerOf(source, name) });
        }
        return mails;
      }).catch((error: unknown) => {
        // An empty mailbox has no message 1.
        if (/nothing to fetch|invalid messageset/i.test(String(error))) return [];
        throw error;
      }),
    markUnseen: (user, messageId) =>
      imap(user, async (client) => {
        const uids = (await client.search({ header: { 'message-id': messageId } }, { uid: true })) || [];
        if (uids.length === 0) throw new Error(`no mail ${messageId} in ${address(user)}'s INBOX`);
        await client.messageFlagsRemove(uids.join(','), ['\\Seen'], { uid: true });
      }),
    stop,
  };
}

function dovecotConfig(dir: string, port: number, mail: { uid: number; gid: number }): string {
  return `protocols = imap
listen = 127.0.0.1
base_dir = ${dir}/dovecot-run
state_dir = ${dir}/dovecot-state
instance_name = theclaw-${port}
log_path = ${dir}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
first_valid_uid = ${mail.uid}
first_valid_gid = ${mail.gid}
mail_location = maildir:${dir}/mail/%n
passdb {
  driver = passwd-file
  args = scheme=PLAIN ${dir}/users
}
userdb {
  driver = static
  args = uid=${mail.uid} gid=${mail.gid} home=${dir}/mail/%n
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = ${port}
  }
  inet_listener imaps {
    port = 0
  }
}
service auth {
  unix_listener ${dir}/auth-postfix {
    mode = 0666
  }
}
`;
}

function postfixMain(dir: string, mail: { uid: number; gid: number }): string {
  return `compatibility_level = 3.6
queue_directory = ${dir}/postfix-queue
data_directory = ${dir}/postfix-data
maillog_file = ${dir}/postfix.log
maillog_file_prefixes = ${dir}
mail_owner = postfix
setgid_group = postdrop
myhostname = mail.${DOMAIN}
mydomain = ${DOMAIN}
myorigin = ${DOMAIN}
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
alias_maps =
alias_database =
local_transport = error:local delivery is off
relay_transport = error:relaying is off
default_transport = error:relaying is off
virtual_mailbox_domains = ${DOMAIN}
virtual_mailbox_base = ${dir}/mail
virtual_mailbox_maps = texthash:${dir}/postfix/vmailbox
virtual_uid_maps = static:${mail.uid}
virtual_gid_maps = static:${mail.gid}
virtual_minimum_uid = ${mail.uid}
smtpd_sasl_auth_enable = yes
smtpd_sasl_type = dovecot
smtpd_sasl_path = ${dir}/auth-postfix
smtpd_relay_restrictions = permit_sasl_authenticated, reject_unauth_destination
smtpd_tls_security_level = none
biff = no
`;
}

/** Postfix's services, none chrooted (the queue is not a chroot jail set up with /etc's files). */
function postfixMaster(port: number): string {
  return `127.0.0.1:${port} inet n - n - - smtpd
pickup unix n - n 60 1 pickup
cleanup unix n - n - 0 cleanup
qmgr unix n - n 300 1 qmgr
rewrite unix - - n - - trivial-rewrite
bounce unix - - n - 0 bounce
defer unix - - n - 0 bounce
trace unix - - n - 0 bounce
verify unix - - n - 1 verify
flush unix n - n 1000? 0 flush
proxymap unix - - n - - proxymap
proxywrite unix - - n - 1 proxymap
showq unix n - n - - showq
error unix - - n - - error
retry unix - - n - - error
discard unix - - n - - discard
virtual unix - n n - - virtual
anvil unix - - n - 1 anvil
scache unix - - n - 1 scache
postlog unix-dgram n - n - 1 postlogd
`;
}

/**
 * The queue's directories with the owners Postfix checks (as `postfix check` makes them, which
 * takes seconds of postconf calls): its user's, the public ones shared with the postdrop group.
 */
function makePostfixQueue(dir: string): void {
  const postfix = idOf('postfix');
  const postdrop = groupIdOf('postdrop');
  const queue = join(dir, 'postfix-queue');
  for (const path of [queue, join(queue, 'pid')]) {
    mkdirSync(path);
    chmodSync(path, 0o755); // postfix's own users enter it, whatever the umask
  }
  for (const name of ['active', 'bounce', 'corrupt', 'defer', 'deferred', 'flush', 'hold', 'incoming', 'private', 'saved', 'trace']) {
    mkdirSync(join(queue, name), { mode: 0o700 });
    chownSync(join(queue, name), postfix.uid, 0);
  }
  for (const [name, mode] of [
    ['maildrop', 0o730],
    ['public', 0o710],
  ] as const) {
    mkdirSync(join(queue, name));
    chmodSync(join(queue, name), mode);
    chownSync(join(queue, name), postfix.uid, postdrop);
  }
  mkdirSync(join(dir, 'postfix-data'), { mode: 0o700 });
  chownSync(join(dir, 'postfix-data'), postfix.uid, 0);
}

function groupIdOf(group: string): number {
  const line = readFileSync('/etc/group', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith(`${group}:`));
  if (!line) throw new Error(`no group ${group} in /etc/group`);
  return Number(line.split(':')[2]);
}

function idOf(user: string): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith(`${user}:`));
  if (!line) throw new Error(`no user ${user} in /etc/passwd`);
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

function spawnServer(file: string, args: string[], output: string): ChildProcess {
  const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const log = (chunk: Buffer) => writeFileSync(output, chunk, { flag: 'a' });
  child.stdout?.on('data', log);
  child.stderr?.on('data', log);
  return child;
}

/** SIGTERM, then SIGKILL after 5 s; resolves once it exited. */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

/** Whether a server on the port greets with `greeting`. */
function greets(port: number, greeting: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let said = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2_000, () => done(false));
    socket.on('data', (chunk) => {
      said += chunk.toString('latin1');
      if (said.includes('\n')) done(said.startsWith(greeting));
    });
    socket.on('error', () => done(false));
  });
}

/** A header of a mail's source, unfolded; the first when there are several. */
function headerOf(source: string, name: string): string | undefined {
  const head = source.split(/\r?\n\r?\n/)[0]!.replace(/\r?\n[ \t]+/g, ' ');
  const line = head.split(/\r?\n/).find((entry) => entry.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}
