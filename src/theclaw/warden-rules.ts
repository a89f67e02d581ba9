import { roughCommands, shellCommands, type ShellCommand } from '../agent/index.js';

/**
 * What the warden looks for in the commands agents run (warden.ts): a table of dangerous
 * patterns, each with the reason the owner reads. A rule looks at one simple command of the line
 * at a time — the bash parser's reading of it (agent/shell-commands.ts), so `rm -rf ~` inside
 * a loop, a function or a `$(...)` is seen as well as a plain one — and at what feeds it: the stage of
 * the pipeline before it, or the command whose argument it is as `$(...)`. Wrappers (`sudo rm`,
 * `env X=1 rm`, `timeout 5 rm`) are looked through, and a script given to `sh -c`, `bash -c`,
 * `eval` or `su -c` is read as a line of its own. A line the parser cannot read (process
 * substitution `<(...)`, a syntax error) is read roughly, split at the shell's operators.
 *
 * No model call: what a model reads can be talked into anything; a table cannot. It errs
 * towards reporting: the owner hears of a command once, and can judge it.
 */
export interface Finding {
  rule: string;
  /** Why it is dangerous, in the owner's words. */
  why: string;
}

/** A command as the rules read it: its name without a directory, its words unquoted. */
interface Command {
  name: string;
  args: string[];
  redirects: { op: string; file: string }[];
  /** The pipeline stage before it: their output is its input. */
  pipedFrom: Command[];
  /** What runs in its words as `$(...)` or `<(...)`: their output is (in) its arguments. */
  inWords: Command[];
}

interface Rule {
  id: string;
  why: string;
  matches: (command: Command) => boolean;
}

// --- The words rules are made of --------------------------------------------------------------

const SHELLS = new Set(['sh', 'bash', 'zsh', 'dash', 'ksh', 'fish', 'ash']);
const INTERPRETERS = new Set([...SHELLS, 'python', 'python2', 'python3', 'perl', 'ruby', 'node', 'php', 'eval', 'source', '.']);
const DOWNLOADERS = new Set(['curl', 'wget', 'fetch', 'aria2c', 'http', 'https', 'nc', 'ncat', 'socat']);
const SENDERS = new Set(['curl', 'wget', 'scp', 'sftp', 'rsync', 'rclone', 'ftp']);
const RAW_SENDERS = new Set(['nc', 'ncat', 'netcat', 'socat', 'telnet']);
const DECODERS = new Set(['base64', 'base32', 'basenc', 'xxd', 'openssl', 'uudecode']);
const FILE_READERS = new Set(['cat', 'tar', 'zip', 'gzip', 'base64', 'xxd', 'head', 'tail', 'less', 'dd']);
/** Paths whose loss wrecks the machine or the person's files. */
const PRECIOUS = /^(~|\/|\/\*|\/(home|root|etc|usr|var|bin|sbin|lib|lib64|boot|opt|srv|dev|sys|proc)|~\/\*|\$THECLAW_HOME|~\/\.theclaw)$/;
const CREDENTIALS = [
  /(^|\/)\.ssh\/(?!known_hosts$|config$)[^/]*(?<!\.pub)$/, // private keys and authorized_keys; not a public key
  /(^|\/)\.ssh\/?$/,
  /(^|\/)\.aws\/(credentials|config)$/,
  /(^|\/)\.(netrc|git-credentials|pgpass|npmrc|pypirc)$/,
  /(^|\/)\.(gnupg|password-store)(\/|$)/,
  /(^|\/)\.config\/gcloud(\/|$)/,
  /(^|\/)\.kube\/config$/,
  /(^|\/)\.docker\/config\.json$/,
  /(^|\/)\.env$/,
  /^\/etc\/(shadow|gshadow|sudoers)$/,
  /(^|\/)webchat-[^/]*\.(token|peer-key)$/,
  /^\/proc\/[^/]+\/environ$/,
];
const STARTUP_FILES = [
  /(^|\/)\.(bashrc|bash_profile|bash_login|profile|zshrc|zprofile|zshenv|zlogin)$/,
  /(^|\/)\.config\/fish\/config\.fish$/,
  /(^|\/)\.ssh\/authorized_keys2?$/,
  /(^|\/)\.config\/(systemd|autostart)(\/|$)/,
  /^\/etc\/(profile|bash\.bashrc|rc\.local|crontab|environment)$/,
  /^\/etc\/(profile\.d|systemd|cron\.[a-z]+|init\.d|sudoers\.d)(\/|$)/,
  /^\/var\/spool\/cron(\/|$)/,
  /(^|\/)Library\/LaunchAgents(\/|$)/,
];
const DISKS = /^\/dev\/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper\/)/;
const LOOPBACK = /^(localhost|127\.\d+\.\d+\.\d+|\[?::1\]?|0\.0\.0\.0)$/;

const isRecursive = (args: string[]) => args.some((arg) => /^-[a-zA-Z]*[rR]/.test(arg) || arg === '--recursive');
const targets = (args: string[]) => args.filter((arg) => !arg.startsWith('-')).map(normalPath);
const writes = (command: Command) => command.redirects.filter((r) => /^(>|>>|>\||&>|&>>|>&)$/.test(r.op) && !/^\d+$/.test(r.file)).map((r) => normalPath(r.file));
/** Whether one of `from` is one of `names` (and passes `test`). */
const anyOf = (from: Command[], names: Set<string>, test?: (command: Command) => boolean) => from.some((command) => names.has(command.name) && (!test || test(command)));
/** What feeds a command, through its input or its words. */
const feeds = (command: Command) => [...command.pipedFrom, ...command.inWords];
const isDecoder = (command: Command) =>
  (['base64', 'base32', 'basenc'].includes(command.name) && command.args.some((arg) => /^(-d|-D|--decode)$/.test(arg))) ||
  (command.name === 'xxd' && command.args.some((arg) => /^-r/.test(arg))) ||
  (command.name === 'openssl' && command.args.includes('-d')) ||
  command.name === 'uudecode';
/** An interpreter that runs what comes in on its input or in an argument, rather than a script file of its own. */
const runsInput = (command: Command) =>
  INTERPRETERS.has(command.name) &&
  (['eval', 'source', '.'].includes(command.name) || targets(command.args).length === 0 || command.args.some((arg) => /^(-|-[a-z]*[sce]|\/dev\/(fd\/\d+|stdin))$/.test(arg)));

function normalPath(word: string): string {
  const path = word
    .replace(/["']/g, '')
    .replace(/^(\$HOME|\$\{HOME\})(?=\/|$)/, '~')
    .replace(/^(\$\{THECLAW_HOME\})(?=\/|$)/, '$THECLAW_HOME')
    .replace(/\/+/g, '/')
    .replace(/(\/\.)+$/, '');
  return path.length > 1 ? path.replace(/\/$/, '') : path;
}

/** The host a word names: a URL's (`https://host/...`), or scp's and rsync's (`user@host:path`). */
function remoteHost(arg: string): string | null {
  const word = arg.replace(/["']/g, '');
  const url = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/]*@)?(\[[^\]]+\]|[^/:?#]+)/i.exec(word);
  if (url) return url[1]!;
  const scp = /^(?:[^@/:\s]+@)?([a-z0-9.-]+|\[[^\]]+\]):/i.exec(word);
  return scp ? scp[1]! : null;
}

const elsewhere = (host: string | null) => host !== null && !LOOPBACK.test(host);
/** Where a command sends to: a URL or remote path among its words, or the host of a raw connection (`nc host port`). */
const sendsElsewhere = (c: Command) =>
  c.args.some((arg) => elsewhere(remoteHost(arg))) ||
  (RAW_SENDERS.has(c.name) &&
    elsewhere(
      targets(c.args)[0]
        ?.replace(/^(tcp|udp|openssl)[46]?:/i, '')
        .split(':')[0] ?? null,
    ));

// --- The table --------------------------------------------------------------------------------

export const RULES: readonly Rule[] = [
  {
    id: 'delete-everything',
    why: 'it deletes the home directory, the whole file system or a system directory, recursively',
    matches: (c) =>
      (c.name === 'rm' && (c.args.includes('--no-preserve-root') || (isRecursive(c.args) && targets(c.args).some((path) => PRECIOUS.test(path))))) ||
      (c.name === 'find' && targets(c.args.slice(0, 1)).some((path) => PRECIOUS.test(path)) && (c.args.includes('-delete') || c.args.some((arg, i) => arg === '-exec' && c.args[i + 1] === 'rm'))),
  },
  {
    id: 'wipe-disk',
    why: 'it overwrites a disk or makes a new file system on it, destroying what is there',
    matches: (c) =>
      /^mkfs(\.|$)/.test(c.name) ||
      ['wipefs', 'fdisk', 'sfdisk', 'parted'].includes(c.name) ||
      (['dd', 'shred'].includes(c.name) && c.args.some((arg) => DISKS.test(arg.replace(/^of=/, '')))) ||
      writes(c).some((path) => DISKS.test(path)),
  },
  {
    id: 'run-downloaded',
    why: 'it runs code downloaded from the network without anyone reading it first',
    matches: (c) => runsInput(c) && anyOf(feeds(c), DOWNLOADERS),
  },
  {
    id: 'run-decoded',
    why: 'it runs hidden code: decoded (base64 or the like) just before it runs',
    matches: (c) => runsInput(c) && anyOf(feeds(c), DECODERS, isDecoder),
  },
  {
    id: 'read-credentials',
    why: 'it reads private keys or credentials (SSH, cloud, package registries, passwords, tokens)',
    matches: (c) => [...c.args, ...c.redirects.map((r) => r.file)].map(normalPath).some((path) => CREDENTIALS.some((pattern) => pattern.test(path))),
  },
  {
    id: 'world-writable',
    why: 'it lets every user and program on the machine change these files',
    matches: (c) => c.name === 'chmod' && c.args.some((arg) => (/^[0-7]{3,4}$/.test(arg) && /[2367]$/.test(arg)) || /^(a|o|ugo|go|uo)[+=][rwxXst]*w/.test(arg)),
  },
  {
    id: 'gain-root',
    why: 'it runs something as root, or makes a program run as its owner whoever starts it',
    matches: (c) =>
      ['sudo', 'doas', 'su', 'pkexec', 'runuser'].includes(c.name) ||
      (c.name === 'chmod' && c.args.some((arg) => /^[ugoa]*\+[rwxt]*s/.test(arg) || /^[2-7][0-7]{3}$/.test(arg))) ||
      (c.name === 'chown' && c.args.some((arg) => /^root(:|$)/.test(arg))),
  },
  {
    id: 'persist',
    why: 'it makes something run again later on its own: at login, at boot or on a schedule',
    matches: (c) =>
      (c.name === 'crontab' && !(c.args.length === 1 && c.args[0] === '-l')) ||
      ['at', 'batch'].includes(c.name) ||
      (c.name === 'systemctl' && c.args.some((arg) => ['enable', 'link', 'reenable', 'preset'].includes(arg))) ||
      (c.name === 'launchctl' && c.args.some((arg) => ['load', 'bootstrap', 'enable'].includes(arg))) ||
      [...writes(c), ...(['tee', 'cp', 'mv', 'install', 'ln', 'rsync', 'sed', 'perl', 'truncate'].includes(c.name) ? targets(c.args) : [])].some((path) =>
        STARTUP_FILES.some((pattern) => pattern.test(path)),
      ),
  },
  {
    id: 'send-files',
    why: 'it sends files from this machine to another host',
    matches: (c) =>
      sendsElsewhere(c) &&
      ((c.name === 'curl' && c.args.some((arg, i) => /^(-T|--upload-file)$/.test(arg) || (/^(-F|--form|-d|--data|--data-binary|--data-urlencode)$/.test(arg) && /(^|=)@/.test(c.args[i + 1] ?? '')))) ||
        (c.name === 'wget' && c.args.some((arg) => /^--(post|body)-file/.test(arg))) ||
        (['scp', 'rsync', 'sftp', 'rclone'].includes(c.name) && elsewhere(remoteHost(c.args.filter((arg) => !arg.startsWith('-')).at(-1) ?? ''))) ||
        (SENDERS.has(c.name) && (anyOf(c.inWords, FILE_READERS) || (anyOf(c.pipedFrom, FILE_READERS) && c.args.some((arg) => /(^|=)@-$|^-$/.test(arg))))) ||
        (RAW_SENDERS.has(c.name) && (c.redirects.some((r) => r.op === '<') || anyOf(feeds(c), FILE_READERS)))),
  },
  {
    id: 'remote-shell',
    why: 'it gives someone on the network a shell on this machine',
    matches: (c) =>
      [...writes(c), ...c.redirects.map((r) => normalPath(r.file))].some((path) => /^\/dev\/(tcp|udp)\//.test(path)) ||
      (['nc', 'ncat', 'netcat'].includes(c.name) && c.args.some((arg) => /^(-e|-c|--exec|--sh-exec)$/.test(arg))) ||
      (c.name === 'socat' && c.args.some((arg) => /^(exec|system):/i.test(arg))),
  },
  {
    id: 'disable-protection',
    why: "it turns off TheClaw's sandbox or the machine's protection (firewall, SELinux, AppArmor)",
    matches: (c) =>
      /profile\s*:\s*none/.test([c.name, ...c.args].join(' ')) ||
      (c.name === 'setenforce' && c.args[0] === '0') ||
      (c.name === 'ufw' && c.args[0] === 'disable') ||
      (c.name === 'iptables' && c.args.some((arg) => /^(-F|--flush)$/.test(arg))) ||
      c.name === 'aa-teardown' ||
      (c.name === 'systemctl' && c.args.some((arg) => ['stop', 'disable', 'mask'].includes(arg)) && c.args.some((arg) => /^(apparmor|firewalld|ufw|auditd)(\.service)?$/.test(arg))),
  },
];

/** What is dangerous about a command line: one finding per rule it breaks, in the table's order. */
export function review(line: string): Finding[] {
  const commands = readCommands(line, 0);
  return RULES.filter((rule) => commands.some((command) => rule.matches(command))).map(({ id, why }) => ({ rule: id, why }));
}

/** Scripts inside scripts (`sh -c "sh -c '...'"`) are read this deep. */
const MAX_DEPTH = 3;
/** Wrappers, with their options that take a value, and how many words come before the command. */
const WRAPPERS: Record<string, { valued: string[]; skip?: number }> = {
  sudo: { valued: ['-u', '-g', '-h', '-p', '-C', '-D', '-r', '-t', '-U', '-T'] },
  doas: { valued: ['-u', '-C'] },
  env: { valued: ['-u', '-C', '-S'] },
  nohup: { valued: [] },
  nice: { valued: ['-n'] },
  ionice: { valued: ['-c', '-n', '-p'] },
  timeout: { valued: ['-s', '-k', '--signal', '--kill-after'], skip: 1 },
  time: { valued: ['-f', '-o'] },
  command: { valued: [] },
  exec: { valued: ['-a'] },
  builtin: { valued: [] },
  stdbuf: { valued: ['-i', '-o', '-e'] },
  setsid: { valued: [] },
  xargs: { valued: ['-I', '-n', '-P', '-d', '-L', '-s', '-E', '-a'] },
  chroot: { valued: [], skip: 1 },
  watch: { valued: ['-n', '-d'] },
  flock: { valued: ['-w', '-E'], skip: 1 },
  busybox: { valued: [] },
};

function readCommands(line: string, depth: number): Command[] {
  const parsed = shellCommands(line) ?? roughCommands(line);
  const byShell = new Map<ShellCommand, Command>();
  const toCommand = (shell: ShellCommand): Command => {
    const known = byShell.get(shell);
    if (known) return known;
    const words = shell.words.map((word) => word.replace(/^(["'])(.*)\1$/s, '$2'));
    const command: Command = { name: basename(words[0] ?? ''), args: words.slice(1), redirects: shell.redirects, pipedFrom: [], inWords: [] };
    byShell.set(shell, command);
    command.pipedFrom = shell.pipedFrom.map(toCommand);
    return command;
  };
  const commands = parsed.map(toCommand);
  // What runs in a word feeds the command: an interpreter given `$(curl ...)` runs what was downloaded.
  parsed.forEach((shell, i) => {
    if (shell.within) toCommand(shell.within).inWords.push(commands[i]!);
  });
  const all = commands.flatMap((command) => [command, ...unwrapped(command)]);
  if (depth >= MAX_DEPTH) return all;
  return all.flatMap((command) => [command, ...scriptsOf(command).flatMap((script) => readCommands(script, depth + 1))]);
}

/** The command a wrapper runs (`sudo -u x rm -rf /` → `rm -rf /`), with what feeds the wrapper. */
function unwrapped(command: Command): Command[] {
  const wrapper = WRAPPERS[command.name];
  if (!wrapper) return [];
  let i = 0;
  const args = command.args;
  while (i < args.length && (args[i]!.startsWith('-') || (command.name === 'env' && args[i]!.includes('=')))) {
    i += wrapper.valued.includes(args[i]!) ? 2 : 1;
  }
  i += wrapper.skip ?? 0;
  if (i >= args.length) return [];
  const inner: Command = { ...command, name: basename(args[i]!), args: args.slice(i + 1) };
  return [inner, ...unwrapped(inner)];
}

/** The scripts a command runs from its arguments: `sh -c '<script>'`, `eval <words>`, `su -c '<script>'`. */
function scriptsOf(command: Command): string[] {
  if (command.name === 'eval') return [command.args.join(' ')];
  if (!SHELLS.has(command.name) && command.name !== 'su') return [];
  const at = command.args.findIndex((arg) => /^-[a-z]*c$/.test(arg));
  return at >= 0 && command.args[at + 1] !== undefined ? [command.args[at + 1]!] : [];
}

function basename(word: string): string {
  return word.slice(word.lastIndexOf('/') + 1);
}
