import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { commandsOf } from './shell-commands.js';
import { commandRuleFor, decide, isOwner, offersTools, PolicySchema, type Policy } from './tool-policy.js';

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

  const allowed = ['ls', 'cat', 'grep', 'echo', 'wc', 'true'];
  /**
   * Command lines of the given programs joined by the shell's operators and nested in `$(...)`;
   * `compound` adds expansions, assignments, subshells, groups, if, for, while and functions,
   * some of whose combinations the parser cannot read (and so never allows).
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
