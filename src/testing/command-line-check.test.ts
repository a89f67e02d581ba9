import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { joinCommand } from '../core/command.js';
import { checkCommandLine, toolWords } from './command-line-check.js';

describe('toolWords', () => {
  it("takes the tool's part of a shell line: after a pipe and variable assignments, without redirections and a trailing comment", () => {
    expect(toolWords(`printf '%s\\n' a | thread push --thread ./demo --batch   # one per line`)).toEqual(['thread', 'push', '--thread', './demo', '--batch']);
    expect(toolWords('OPENAI_API_KEY=sk-... theclaw demo --real')).toEqual(['theclaw', 'demo', '--real']);
    expect(toolWords('pai chat --json "list my files" 2>events.ndjson')).toEqual(['pai', 'chat', '--json', 'list my files']);
    expect(toolWords(`xgw send --idempotency-key t1#42 --text "# not a comment" --peer 'it''s'`)).toEqual(['xgw', 'send', '--idempotency-key', 't1#42', '--text', '# not a comment', '--peer', 'its']);
    expect(toolWords('thread push \\\n  --thread ./t')).toEqual(['thread', 'push', '--thread', './t']);
    expect(toolWords('A=1')).toEqual([]);
  });

  it('gives back the argv of any quoted command line, whatever comment follows it', () => {
    const word = fc.string({ minLength: 1, maxLength: 12 }).filter((text) => text !== '|' && !/^\d*[<>]/.test(text) && !text.includes('\n'));
    const program = fc.stringMatching(/^[a-z][a-z-]{0,8}$/);
    fc.assert(
      fc.property(program, fc.array(word, { maxLength: 6 }), fc.string({ maxLength: 20 }), (name, args, comment) => {
        expect(toolWords(`${joinCommand([name, ...args])}  #${comment.replaceAll('\n', ' ')}`)).toEqual([name, ...args]);
      }),
    );
  });
});

describe('checkCommandLine', () => {
  it("accepts what the tool's program accepts, and lines of other programs", async () => {
    expect(await checkCommandLine('thread ack --thread ./demo --consumer worker --event-id 4')).toBeUndefined();
    expect(await checkCommandLine('echo "summarise this" | pai chat --provider openai --model gpt-4o-mini')).toBeUndefined();
    expect(await checkCommandLine('npm install')).toBeUndefined();
  });

  it('runs nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'theclaw-check-'));
    try {
      expect(await checkCommandLine(`thread init ${join(dir, 'demo')}`)).toBeUndefined();
      expect(existsSync(join(dir, 'demo'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says what is wrong with an unknown command or option, a missing option or a value left over, without running anything', async () => {
    expect(await checkCommandLine('thread ack --thread ./demo --consumer worker --event 4')).toMatch(/unknown option '--event'|required option '--event-id <id>' not specified/);
    expect(await checkCommandLine('thread nope')).toMatch(/unknown command 'nope'/);
    expect(await checkCommandLine('agent init a b')).toMatch(/too many arguments for 'init'/);
    expect(await checkCommandLine('notifier timer add --id x --every 30m --command x --limit 0')).toMatch(/unknown option '--limit'/);
    expect(await checkCommandLine('thread pop --thread ./demo --consumer worker --limit 0')).toMatch(/--limit/);
  });
});
