import { posix } from 'node:path';

/**
 * Programs that run another program named in their words (`env curl`, `sudo -u x rm`, `find -exec
 * rm {} ;`) or shell code given as a string (`eval`, `sh -c`, `trap`): a policy decides what they
 * run as well as them. Each reads its own options here, so that the command it runs is found
 * where it runs it, not guessed; an option it does not know leaves the command unreadable, since
 * an unknown option may take the next word as its value.
 */
interface Wrapper {
  /** Options without a value: short ones as letters, long ones as `--name`. */
  flags?: string;
  /** Options that take a value: the next word, or the rest of the word (`-n5`, `--adjustment=5`). */
  valued?: string;
  /** Short options whose value, if any, is the rest of the word only (xargs `-i[replace]`). */
  joined?: string;
  /** Options after which it runs nothing (`command -v` says what a name is). */
  inert?: string;
  /** Words after the options and before the command (`timeout`'s duration, `chroot`'s root). */
  operands?: number;
  /** Leading `NAME=value` words set its command's environment (`env`). */
  assignments?: boolean;
  /** A short option that makes its first operand shell code (`sh -c`). */
  script?: string;
}

const SHELL: Wrapper = { flags: 'abefhkmnptuvxBCEHPTilrs --norc --noprofile --login --posix --restricted --noediting', valued: 'oO --rcfile --init-file', script: 'c' };

const WRAPPERS: Record<string, Wrapper> = {
  command: { flags: 'p', inert: 'vV' },
  builtin: {},
  exec: { flags: 'cl', valued: 'a' },
  env: { flags: 'i0v --ignore-environment --null --debug', valued: 'uC --unset --chdir', assignments: true },
  nice: { valued: 'n --adjustment' },
  nohup: {},
  setsid: { flags: 'cfw --ctty --fork --wait' },
  stdbuf: { valued: 'ioe --input --output --error' },
  ionice: { flags: 't --ignore', valued: 'cn --class --classdata', inert: 'p' },
  timeout: { flags: 'v --preserve-status --foreground --verbose', valued: 'ks --kill-after --signal', operands: 1 },
  chroot: { valued: '--userspec --groups', operands: 1 },
  xargs: {
    flags: '0prtx --null --interactive --no-run-if-empty --verbose --exit --open-tty',
    valued: 'adEILnPs --arg-file --delimiter --eof --replace --max-lines --max-args --max-procs --max-chars --process-slot-var',
    joined: 'eil',
  },
  sudo: {
    flags: 'AbEHiknPSs --askpass --background --preserve-env --set-home --login --non-interactive --preserve-groups --stdin --shell',
    valued: 'CDgprTtUuR --close-from --chdir --group --prompt --role --command-timeout --type --other-user --user --chroot',
    inert: 'eKlVv',
  },
  doas: { flags: 'ns', valued: 'u', inert: 'C' },
  busybox: {},
  coproc: {},
  toybox: {},
  time: { flags: 'pv', valued: 'fo' },
  sh: SHELL,
  bash: SHELL,
  dash: SHELL,
  zsh: SHELL,
  ksh: SHELL,
};

/**
 * Programs that run a command given in their words by rules not read here (`watch -n1 cmd`, `su
 * -c cmd`, `flock file cmd`, `ssh host cmd`): what they run is unreadable.
 */
const OPAQUE = new Set(
  'watch flock su runuser setpriv unshare nsenter chrt taskset prlimit numactl systemd-run firejail strace ltrace parallel script ssh pkexec bwrap unbuffer xvfb-run dbus-run-session valgrind fakeroot faketime torsocks proxychains proxychains4 sg docker podman kubectl'.split(
    ' ',
  ),
);

/** A command a command runs: its words from `start` to before `end`, or shell code to read. */
export type Run = { start: number; end: number } | { script: string };

/** A program's name however it is written: `/usr/bin/../bin/curl` → `curl`. */
export function programName(word: string): string {
  return posix.basename(posix.normalize(word));
}

/**
 * What the command in `words[start..end)` runs besides itself, one wrapper deep: none for an
 * ordinary program, null when it cannot be read (a word it needs is computed when it runs, an
 * option it does not know, `env NAME=value`, which may change what a name runs).
 */
export function runsOf(words: readonly string[], literal: number, start: number, end: number): Run[] | null {
  const name = programName(words[start]!);
  if (name === 'eval') return end > literal ? null : [{ script: words.slice(start + 1, end).join(' ') }];
  if (name === 'trap') return trapRuns(words, literal, start, end);
  if (name === 'find') return findRuns(words, literal, start, end);
  if (OPAQUE.has(name)) return null;
  const wrapper = WRAPPERS[name];
  if (wrapper === undefined) return [];
  let i = start + 1;
  let script = false;
  // A shell takes `+x` as well as `-x`.
  for (; i < end && (/^-./.test(words[i]!) || (wrapper === SHELL && /^\+./.test(words[i]!))); i++) {
    if (i >= literal) return null;
    const word = words[i]!;
    if (word === '--') {
      i++;
      break;
    }
    const option = readOption(wrapper, word);
    if (option === null) return null;
    if (option === 'inert') return [];
    if (option === 'script') script = true;
    // A computed value may split into more words (`sudo -u $u rm` with u='x curl').
    if (option === 'valued' && ++i >= literal) return null;
  }
  if (name === 'env' && words[i] === '-') i++; // the old spelling of -i
  if (wrapper.assignments && i < end && (i >= literal || /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]!))) return null;
  i += wrapper.operands ?? 0;
  // `sh -c` without its code (`xargs sh -c`) takes it from elsewhere.
  if (i >= end) return script ? null : [];
  if (i >= literal) return null;
  if (script) return [{ script: words[i]! }];
  // xargs adds words from its input: a wrapper it runs finds its command there.
  if (name === 'xargs' && runsOthers(programName(words[i]!))) return null;
  // A shell without -c runs a file or its input: the policy has only the shell's own name to go by.
  return wrapper === SHELL ? [] : [{ start: i, end }];
}

function runsOthers(name: string): boolean {
  return name in WRAPPERS || OPAQUE.has(name) || ['eval', 'trap', 'find'].includes(name);
}

/** How an option word reads: a flag, an option whose value is the next word, or null if unknown. */
function readOption(wrapper: Wrapper, word: string): 'flag' | 'valued' | 'inert' | 'script' | null {
  const has = (list: string | undefined, option: string) =>
    (list ?? '').split(' ').some((entry) => (option.startsWith('--') ? entry === option : entry.length > 0 && !entry.startsWith('-') && entry.includes(option)));
  if (word.startsWith('--')) {
    const [option = '', value] = word.split('=', 2);
    if (has(wrapper.flags, option) && value === undefined) return 'flag';
    if (has(wrapper.valued, option)) return value === undefined ? 'valued' : 'flag';
    return null;
  }
  let reading: 'flag' | 'script' = 'flag';
  for (let j = 1; j < word.length; j++) {
    const letter = word[j]!;
    if (has(wrapper.inert, letter)) return 'inert';
    if (has(wrapper.joined, letter)) return reading;
    if (has(wrapper.valued, letter)) return j === word.length - 1 ? 'valued' : reading;
    if (has(wrapper.script, letter)) reading = 'script';
    else if (!has(wrapper.flags, letter)) return null;
  }
  return reading;
}

/** `trap CODE SIGNAL...` runs CODE on a signal; `trap SIGNAL`, `trap - SIGNAL` and `trap -p` run nothing. */
function trapRuns(words: readonly string[], literal: number, start: number, end: number): Run[] | null {
  if (end > literal) return null; // a computed word may split into code and signals
  const first = words[start + 1] === '--' ? start + 2 : start + 1;
  return end - first < 2 || words[first]!.startsWith('-') ? [] : [{ script: words[first]! }];
}

/** `find ... -exec CMD ... ;` (and `-execdir`, `-ok`, `-okdir`) runs CMD, to its `;` or `+`. */
function findRuns(words: readonly string[], literal: number, start: number, end: number): Run[] | null {
  if (end > literal) return null; // a computed word may be an `-exec`
  const runs: Run[] = [];
  for (let i = start + 1; i < end; i++) {
    if (!['-exec', '-execdir', '-ok', '-okdir'].includes(words[i]!)) continue;
    let last = i + 1;
    while (last < end && words[last] !== ';' && words[last] !== '+') last++;
    if (last > i + 1) runs.push({ start: i + 1, end: last });
    i = last;
  }
  return runs;
}
