import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { commandsOf } from './shell-commands.js';
import { commandRuleFor, decide, isOwner, MAX_READ_LINE_BYTES, offersTools, overReadLimit, PolicySchema, TOOL_DECISIONS, type Policy } from './tool-policy.js';

const external = (channelType: string, conversationType: string, peerId: string, instance = 'main') =>
  formatAddress({ kind: 'external', channelType, instance, conversationType, conversationId: conversationType === 'dm' ? peerId : 'g1', peerId });
const agentAsks = (agentId: string) => formatAddress({ kind: 'internal', conversationType: 'task', conversationId: 'c1', agentId });
const policy = (given: unknown = {}): Policy => PolicySchema.parse(given);

describe('tool policy: who may have commands run', () => {
  it("by default runs the owner's direct chats' commands and nobody else's, and offers no tool where all is denied", () => {
    const defaults = { ...policy({ owners: ['telegram:main:42'] }), ownerWebchats: ['webchat:main'] };
    expect(commandRuleFor(defaults, external('webchat', 'dm', 'owner'))).toBe('allow');
    expect(commandRuleFor(defaults, external('terminal', 'dm', 'me', 'local'))).toBe('allow');
    expect(commandRuleFor(defaults, external('telegram', 'dm', '42'))).toBe('allow');
    for (const source of [external('telegram', 'dm', '43'), external('telegram', 'group', '42'), external('webchat', 'group', 'owner'), agentAsks('admin'), 'self', 'not an address']) {
      expect(commandRuleFor(defaults, source), source).toBe('deny');
      expect(offersTools(commandRuleFor(defaults, source))).toBe(false);
    }
    expect(isOwner(defaults, external('telegram', 'dm', '42', 'other'))).toBe(false); // another bot's peer 42 is someone else
  });

  it('takes the first configured rule that matches by channel, conversation and peer, before the defaults', () => {
    const configured = {
      ...policy({
        rules: [
          { channel: 'telegram:main', peer: '7', bash: 'ask' },
          { channel: 'telegram', conversation: 'group', bash: { allow: ['ls'] } },
          { channel: 'agent', peer: 'admin', bash: 'allow' },
          { peer: 'owner', bash: { allow: ['ls', 'git status'], otherwise: 'deny' } },
        ],
      }),
      ownerWebchats: ['webchat:main'],
    };
    expect(commandRuleFor(configured, external('telegram', 'dm', '7'))).toBe('ask');
    expect(commandRuleFor(configured, external('telegram', 'dm', '7', 'work'))).toBe('deny');
    expect(commandRuleFor(configured, external('telegram', 'group', '8'))).toEqual({ allow: ['ls'], otherwise: 'ask' });
    expect(commandRuleFor(configured, agentAsks('admin'))).toBe('allow');
    expect(commandRuleFor(configured, agentAsks('evolver'))).toBe('deny');
    expect(commandRuleFor(configured, external('webchat', 'dm', 'owner'))).toEqual({ allow: ['ls', 'git status'], otherwise: 'deny' });
  });

  it("takes the terminal and the owner's own web chat for the owner, a guest web chat's peers only where policy.owners lists them", () => {
    const guest = external('webchat', 'dm', 'a'.repeat(32), 'guests');
    const held = { ...policy(), ownerWebchats: ['webchat:main'] };
    expect(isOwner(held, guest)).toBe(false);
    expect(commandRuleFor(held, guest)).toBe('deny');
    expect(
      commandRuleFor(
        {
          ...held,
          rules: [
            { peer: 'owner', bash: 'allow' },
            { peer: 'other', bash: 'ask' },
          ],
        },
        guest,
      ),
    ).toBe('ask');
    expect(isOwner(held, external('webchat', 'dm', 'b'.repeat(32)))).toBe(true);
    expect(isOwner(held, external('terminal', 'dm', 'me', 'local'))).toBe(true);
    // Without xgw's word (no config, or a policy built from the agent's config alone) no web chat is the owner's.
    expect(isOwner(policy(), external('webchat', 'dm', 'b'.repeat(32)))).toBe(false);
    expect(isOwner(policy(), external('terminal', 'dm', 'me', 'local'))).toBe(true);
    const listed = { ...policy({ owners: [`webchat:guests:${'a'.repeat(32)}`] }), ownerWebchats: ['webchat:main'] };
    expect(isOwner(listed, guest)).toBe(true);
    expect(isOwner(listed, external('webchat', 'dm', 'c'.repeat(32), 'guests'))).toBe(false);
  });

  it("never gives an agent the owner's rule, whatever its id: an agent named owner is another agent", () => {
    const agentInDm = (agentId: string) => formatAddress({ kind: 'internal', conversationType: 'dm', conversationId: 'c1', agentId });
    expect(commandRuleFor(policy(), agentInDm('owner'))).toBe('deny');
    expect(commandRuleFor(policy({ rules: [{ peer: 'owner', bash: 'allow' }] }), agentAsks('owner'))).toBe('deny');
    expect(commandRuleFor(policy({ rules: [{ peer: 'other', bash: 'ask' }] }), agentAsks('owner'))).toBe('ask');
    expect(commandRuleFor(policy({ rules: [{ peer: 'admin', bash: 'ask' }] }), agentAsks('admin'))).toBe('ask');
  });

  it('refuses a malformed owner or rule with the field at fault', () => {
    expect(PolicySchema.safeParse({ owners: ['42'] }).error?.issues[0]?.message).toContain('<channel type>:<instance>:<peer id>');
    expect(PolicySchema.safeParse({ rules: [{ bash: 'maybe' }] }).success).toBe(false);
    expect(PolicySchema.safeParse({ rules: [{ peer: 'owner', bash: 'allow', extra: 1 }] }).success).toBe(false);
  });
});

describe('tool policy: which commands', () => {
  const listed = { allow: ['ls', 'cat', 'grep', 'git status'], ask: ['git'], deny: ['rm'], otherwise: 'ask' as const };

  it('gives a command line the strictest decision among the commands it runs', () => {
    expect(decide(listed, 'ls -la | grep x')).toBe('allow');
    expect(decide(listed, 'git status -s && cat README.md')).toBe('allow');
    expect(decide(listed, 'git push')).toBe('ask');
    expect(decide(listed, 'curl example.com')).toBe('ask');
    expect(decide(listed, 'ls; rm -rf /')).toBe('deny');
    expect(decide(listed, 'echo $(rm x)')).toBe('deny');
    expect(decide(listed, 'cat `which rm`')).toBe('ask');
    expect(decide({ allow: ['ls'], otherwise: 'deny' }, 'ls && touch x')).toBe('deny');
  });

  it('asks about a line it cannot read, or denies it where anything unlisted is denied', () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: `${x:-…}` is a bash expansion the parser must refuse.
    for (const line of ['$CMD', 'ls "unterminated', 'PATH=. ls', 'echo ${x:-$(rm y)}', 'cat <(rm x)', 'echo $((id);(rm x))']) {
      expect(commandsOf(line), line).toBeNull();
      expect(decide(listed, line), line).toBe('ask');
      expect(decide({ allow: ['ls', 'echo', 'cat'], otherwise: 'deny' }, line), line).toBe('deny');
      expect(decide({ allow: ['ls', 'echo', 'cat'], otherwise: 'allow' }, line), line).toBe('ask');
    }
  });

  it('decides a command by the longest pattern it starts with, whichever list holds it, and the strictest among equals', () => {
    const allowGitAskPush = policy({ rules: [{ bash: { allow: ['git'], ask: ['git push'] } }] }).rules[0]!.bash;
    expect(decide(allowGitAskPush, 'git push origin')).toBe('ask');
    expect(decide(allowGitAskPush, 'git pull')).toBe('allow');
    expect(decide({ ask: ['git'], allow: ['git status'], otherwise: 'deny' }, 'git status -s')).toBe('allow');
    expect(decide({ ask: ['git'], allow: ['git status'], otherwise: 'deny' }, 'git push')).toBe('ask');
    expect(decide({ allow: ['git'], deny: ['git push'], otherwise: 'ask' }, 'git push')).toBe('deny');
    expect(decide({ deny: ['git'], allow: ['git status'], otherwise: 'ask' }, 'git status')).toBe('allow');
    expect(decide({ deny: ['git'], allow: ['git status'], otherwise: 'ask' }, 'git log')).toBe('deny');
    expect(decide({ allow: ['git push'], deny: ['git push'], otherwise: 'ask' }, 'git push')).toBe('deny');
  });

  it('runs none of the commands hidden in a parameter transformation or an array subscript (issue 20)', () => {
    const rule = { allow: ['echo', 'printf', 'test', '[', 'read', 'declare'], otherwise: 'deny' as const };
    for (const line of [
      `x='$(touch m)'; echo "\${x@P}"`,
      `printf -v 'a[$(touch m)]' x`,
      `test -v 'a[$(touch m)]'`,
      `[ -v 'a[$(touch m)]' ]`,
      `o=-v; test $o 'a[$(touch m)]'`,
      `i='a[$(touch m)]'; echo \${b[i]}`,
      `x='a[$(touch m)]'; echo \${!x}`,
      `i='a[$(touch m)]'; a[i]=1`,
      `echo='a[$(touch m)]'; ((echo))`,
      `x='a[$(touch m)]'; [[ $x -eq 1 ]]`,
      `read 'a[$(touch m)]' <<< x`,
      `declare -i n; n='a[$(touch m)]'`,
      `declare -n r='a[$(touch m)]'; echo $r`,
      `command printf -v 'a[$(touch m)]' x`,
    ]) {
      expect(decide(rule, line), line).toBe('deny');
    }
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash expansions that run nothing.
    for (const line of ['printf -v x %s y', "printf '%s[1]' a", 'test -f "$f"', '[ "$a" = "$b" ]', 'echo ${x:-a} ${#x} ${x%.*} ${y:1:2} ${a[@]}', 'read -r line', 'declare x=1']) {
      expect(decide(rule, line), line).toBe('allow');
    }
  });

  it('denies every spelling of a denied program: by path, and as what a wrapper or a shell string runs (issue 20)', () => {
    const rule = { deny: ['curl', 'rm'], otherwise: 'allow' as const };
    for (const line of [
      '/usr/bin/curl x',
      '/usr/bin/../bin/curl x',
      './rm x',
      'command curl x',
      'exec curl x',
      'env curl x',
      'eval curl x',
      "eval 'rm -rf x'",
      'busybox rm x',
      'sudo -u bob rm x',
      'sudo nice -n 5 env rm x',
      'timeout -s KILL 5 curl x',
      'xargs -0 rm < list',
      'nohup curl x &',
      "sh -c 'curl x'",
      'bash -ec "echo a; rm x"',
      "find . -name '*.o' -exec rm {} ';'",
      "trap 'rm x' EXIT",
      'env - curl x',
      'coproc curl x',
    ]) {
      expect(decide(rule, line), line).toBe('deny');
    }
    // What cannot be read is asked about: a computed word where a wrapper finds its command, an
    // option it does not know (it may take a value), an environment that may change what runs.
    for (const line of [
      'env A=1 curl x',
      'sudo -Z rm x',
      'eval "$x"',
      'sh -c "$x"',
      'timeout "$t" rm x',
      'sudo -u $u rm x',
      'find . $x',
      'watch -n1 curl x',
      "su -c 'rm x' root",
      'echo curl x | xargs env',
      "echo 'rm x' | xargs sh -c",
      "find . -exec {} ';'",
    ]) {
      expect(decide(rule, line), line).toBe('ask');
    }
    for (const line of ['command -v curl', 'xargs', 'bash script.sh', 'find . -name rm', 'trap - EXIT']) {
      expect(decide(rule, line), line).toBe('allow');
    }
  });

  it('asks about a line whose quotes the parser removes otherwise than bash, rather than read code bash does not run', () => {
    // Bash runs `eval 'command rm'` here; the parser read the word as `eval 'eval '''command` (fast-check found it).
    const line = String.raw`eval 'eval '\''eval '\''\'\'''\''command rm'\''\'\'''\'''\'''`;
    expect(commandsOf(line)).toBeNull();
    expect(decide({ deny: ['rm'], otherwise: 'allow' }, line)).toBe('ask');
    // It reads `\\\'` as `'` and `"a\\b"` with a backspace; a substitution's words cannot be checked.
    for (const text of [String.raw`echo \\\'`, String.raw`echo "a\\b"`, String.raw`echo $(printf 'a\n')`]) expect(commandsOf(text), text).toBeNull();
    expect(commandsOf(String.raw`echo 'it'\''s' "a b" a\ b`)).toEqual([['echo', "it's", 'a b', 'a b']]);
  });

  it("matches a program named by its path by its name, and one outside the system's bin folders no more than otherwise", () => {
    const rule = { allow: ['ls'], otherwise: 'deny' as const };
    expect(decide(rule, '/usr/bin/ls -l')).toBe('allow');
    expect(decide(rule, '/bin/../usr/bin/ls')).toBe('allow');
    expect(decide(rule, './ls')).toBe('deny');
    expect(decide(rule, '/tmp/ls')).toBe('deny');
    expect(decide({ allow: ['ls'], otherwise: 'ask' }, '~/bin/ls')).toBe('ask');
  });

  it('refuses a line over the limit unread with a message saying how to split it, and one nested too deep or with too many substitutions as unreadable', () => {
    const rule = { allow: ['echo'], otherwise: 'deny' as const };
    const long = `echo ${'a'.repeat(MAX_READ_LINE_BYTES)}`;
    expect(decide(rule, long)).toBe('deny');
    expect(overReadLimit(rule, long)).toBe(
      "the command is 9 KB, over the policy's limit of 8 KB for reading a command: it did not run. Split it into shorter commands (write a long file in parts, appending with >>), or run a script file.",
    );
    expect(overReadLimit(rule, 'echo a')).toBeNull();
    expect(overReadLimit('allow', long)).toBeNull(); // nothing is read under a rule without patterns
    expect(decide(rule, `echo ${'a'.repeat(MAX_READ_LINE_BYTES - 5)}`)).toBe('allow');
    expect(decide(rule, `${'echo a && '.repeat(MAX_READ_LINE_BYTES / 10 - 1)}echo a`)).toBe('allow');
    for (const line of [`${'( '.repeat(101)}echo a${' )'.repeat(101)}`, 'echo $(echo a) '.repeat(101)]) expect(commandsOf(line)).toBeNull();
    expect(commandsOf(`${'( '.repeat(100)}echo a${' )'.repeat(100)}`)).toEqual([['echo', 'a']]);
    expect(decide(rule, 'echo $(echo a) '.repeat(100))).toBe('allow');
    expect(commandsOf('eval echo; '.repeat(100))).toHaveLength(200);
    expect(commandsOf('eval echo; '.repeat(101))).toBeNull();
  });

  const allowed = ['ls', 'cat', 'grep', 'echo', 'wc', 'true', 'printf', 'test'];
  const quoted = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;
  /**
   * Command lines of the given programs joined by the shell's operators and nested in `$(...)`;
   * `compound` adds expansions, assignments, subshells, groups, if, for, while and functions,
   * some of whose combinations the parser cannot read (and so never allows), and code hidden
   * from a reading of words: in a quoted string that a parameter transformation, an array
   * subscript in a name, or a wrapper runs.
   */
  const lines = (programs: string[], compound: boolean) => {
    const simple = fc
      .tuple(fc.constantFrom(...programs), fc.array(fc.constantFrom('-l', 'x', '"a b"', "'c'", '>out', ...(compound ? ['$HOME'] : [])), { maxLength: 3 }))
      .map(([name, args]) => [name, ...args].join(' '));
    return fc.letrec<{ cmd: string }>((tie) => ({
      cmd: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        simple,
        fc.tuple(tie('cmd'), fc.constantFrom(' | ', ' && ', ' || ', '; ', ' & ', '\n'), tie('cmd')).map(([a, op, b]) => `${a}${op}${b}`),
        tie('cmd').map((inner) => `echo $(${inner})`),
        ...(compound
          ? [
              tie('cmd').map((inner) => `x="$(${inner})"`),
              tie('cmd').map((inner) => `(${inner})`),
              tie('cmd').map((inner) => `{ ${inner}; }`),
              tie('cmd').map((inner) => `if true; then ${inner}; fi`),
              tie('cmd').map((inner) => `for f in a b; do ${inner}; done`),
              tie('cmd').map((inner) => `while false; do ${inner}; done`),
              tie('cmd').map((inner) => `g() { ${inner}; }; g`),
              fc.tuple(tie('cmd'), fc.constantFrom('P', 'E', 'Q', 'A'), fc.constantFrom('"', '')).map(([inner, op, quote]) => `x=${quoted(`$(${inner})`)}; echo ${quote}\${x@${op}}${quote}`),
              fc
                .tuple(
                  tie('cmd'),
                  fc.constantFrom(
                    (name: string) => `printf -v ${name} x`,
                    (name: string) => `test -v ${name}`,
                    (name: string) => `[ -v ${name} ]`,
                    (name: string) => `i=${name}; echo "\${b[i]}"`,
                    (name: string) => `x=${name}; echo "\${!x}"`,
                    (name: string) => `i=${name}; b[i]=1`,
                  ),
                )
                .map(([inner, use]) => use(quoted(`a[$(${inner})]`))),
              fc.tuple(fc.constantFrom('eval', 'sh -c', 'bash -ec', 'sudo sh -c', 'env sh -c'), tie('cmd')).map(([wrapper, inner]) => `${wrapper} ${quoted(inner)}`),
              fc
                .tuple(fc.constantFrom('command', 'exec', 'env', 'nice -n 5', 'timeout 5', 'xargs -0', 'sudo -u x', 'busybox', 'nohup', '/usr/bin/env', 'builtin'), simple)
                .map(([wrapper, inner]) => `${wrapper} ${inner}`),
            ]
          : []),
      ),
    })).cmd;
  };

  it('never allows a line that runs an unlisted program anywhere in it (property)', () => {
    const rule = { allow: allowed, otherwise: 'deny' as const };
    fc.assert(
      fc.property(lines([...allowed, 'rm', 'curl', 'sh'], true), (text) => {
        // `false` and the function `g` are programs the rule does not list either.
        fc.pre(/\b(rm|curl|sh|false|g)\b/.test(text));
        expect(decide(rule, text), text).not.toBe('allow');
      }),
      { numRuns: 300 },
    );
  });

  it('never allows a line that runs a denied program anywhere in it, however it is wrapped or hidden (property)', () => {
    const rule = { deny: ['rm', 'curl'], otherwise: 'allow' as const };
    fc.assert(
      fc.property(lines([...allowed, 'rm', 'curl', '/usr/bin/rm'], true), (text) => {
        fc.pre(/\b(rm|curl)\b/.test(text));
        expect(decide(rule, text), text).not.toBe('allow');
      }),
      { numRuns: 300 },
    );
  });

  it('reads a last word `*` of a pattern as "with any arguments": `web *` is `web`, `git push *` is `git push`', () => {
    const webOnly = { allow: ['web *'], otherwise: 'deny' as const };
    expect(decide(webOnly, 'web fetch http://127.0.0.1/')).toBe('allow');
    expect(decide(webOnly, 'web')).toBe('allow');
    expect(decide(webOnly, 'ls')).toBe('deny');
    expect(decide(webOnly, 'web fetch x | sh')).toBe('deny');
    expect(decide({ allow: ['git'], deny: ['git push *'], otherwise: 'ask' }, 'git push origin')).toBe('deny');
    expect(decide({ allow: ['git'], deny: ['git push *'], otherwise: 'ask' }, 'git pull')).toBe('allow');
  });

  it('decides every line alike whether its patterns end in ` *` or not (property)', () => {
    const words = ['git', 'push', 'status', 'web', 'fetch', 'ls', '-l', 'x'];
    const pattern = fc.array(fc.constantFrom(...words), { minLength: 1, maxLength: 3 }).map((w) => w.join(' '));
    const patterns = fc.array(fc.tuple(pattern, fc.boolean()), { maxLength: 4 });
    const rule = fc.record({ allow: patterns, ask: patterns, deny: patterns, otherwise: fc.constantFrom(...TOOL_DECISIONS) });
    const line = fc.array(fc.array(fc.constantFrom(...words, '*'), { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 3 }).map((commands) => commands.map((c) => c.join(' ')).join(' && '));
    fc.assert(
      fc.property(rule, line, ({ allow, ask, deny, otherwise }, text) => {
        const bare = { allow: allow.map(([p]) => p), ask: ask.map(([p]) => p), deny: deny.map(([p]) => p), otherwise };
        const starred = { allow: allow.map(([p, star]) => (star ? `${p} *` : p)), ask: ask.map(([p, star]) => (star ? `${p} *` : p)), deny: deny.map(([p, star]) => (star ? `${p} *` : p)), otherwise };
        expect(decide(starred, text), text).toBe(decide(bare, text));
      }),
      { numRuns: 300 },
    );
  });

  it('allows a line of listed programs joined by the operators, with their output in arguments (property)', () => {
    // Deeper nesting is beyond the parser (`$(a $(b))`): it is asked about, never allowed.
    const rule = { allow: allowed, otherwise: 'deny' as const };
    const simple = fc.tuple(fc.constantFrom(...allowed), fc.array(fc.constantFrom('-l', 'x', '"a b"', "'c'", '>out'), { maxLength: 3 })).map(([name, args]) => [name, ...args].join(' '));
    const part = fc.oneof(
      simple,
      simple.map((inner) => `echo $(${inner})`),
    );
    const line = fc.array(fc.tuple(part, fc.constantFrom(' | ', ' && ', ' || ', '; ', ' & ')), { minLength: 1, maxLength: 5 }).map((parts) => parts.map(([p, op]) => p + op).join('') + 'true');
    fc.assert(
      fc.property(line, (text) => {
        expect(decide(rule, text), text).toBe('allow');
      }),
      { numRuns: 300 },
    );
  });
});
