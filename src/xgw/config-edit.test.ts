import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, rejection, startedInbox, type TestHome } from '../testing/index.js';
import { addChannel, addRoute, channelEntry, removeChannel, removeRoute } from './config-edit.js';
import { DEFAULT_XGW_CONFIG, inspectXgwConfig } from './config.js';
import { createXgwProgram } from './program.js';

// The config edits of `xgw channel|route add|remove` on a home whose xgw is not running: what
// the flags become, what lands in the file (comments and order kept), and what is refused.

let t: TestHome;
beforeEach(() => {
  t = createTestHome();
});
afterEach(() => t.cleanup());

const file = () => join(t.home, 'xgw', 'config.yaml');
const write = (text: string) => {
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeFileSync(file(), text);
};

/** The options commander hands the action of `xgw <argv>`, the action itself not run. */
function parsedOptions(argv: string[]): { args: string[]; options: Record<string, unknown> } {
  const program = createXgwProgram();
  let parsed: { args: string[]; options: Record<string, unknown> } | undefined;
  const find = (command: Command, names: string[]): Command => (names.length === 0 ? command : find(command.commands.find((c) => c.name() === names[0])!, names.slice(1)));
  const command = find(program, argv.filter((arg) => !arg.startsWith('-')).slice(0, 2));
  command.action((...args: unknown[]) => {
    const options = (args.at(-1) as Command).opts();
    parsed = { args: args.slice(0, -2) as string[], options };
  });
  program.parse(argv, { from: 'user' });
  return parsed!;
}

describe('xgw channel add flags', () => {
  it('become the entry written: the type from the id, repeated --allow a list, --port a number, --no-reload', () => {
    const { args, options } = parsedOptions(['channel', 'add', 'webchat:guests', '--port', '0', '--access', 'pairing', '--allow', 'a1', '--allow', 'b2', '--no-reload']);
    expect(args).toEqual(['webchat:guests']);
    expect(options).toMatchObject({ port: 0, access: 'pairing', allow: ['a1', 'b2'], reload: false });
    expect(channelEntry(args[0]!, options)).toEqual({ id: 'webchat:guests', type: 'webchat', access: 'pairing', allow: ['a1', 'b2'], port: 0 });
    expect(parsedOptions(['channel', 'add', 'telegram:main', '--token-env', 'MY_TOKEN']).options).toMatchObject({ tokenEnv: 'MY_TOKEN', reload: true });
    const slack = parsedOptions(['channel', 'add', 'slack:team', '--token-env', 'TEAM_BOT', '--app-token-env', 'TEAM_APP']);
    expect(channelEntry(slack.args[0]!, slack.options)).toEqual({ id: 'slack:team', type: 'slack', token_env: 'TEAM_BOT', app_token_env: 'TEAM_APP' });
  });

  it('refuses a port that is not a number as a usage error', () => {
    expect(() => parsedOptions(['channel', 'add', 'webchat:x', '--port', 'eighty'])).toThrow('--port must be a whole number, got "eighty"');
  });

  it('give route add and remove * for a channel and a peer not named', () => {
    expect(parsedOptions(['route', 'add', '--agent', 'helper']).options).toMatchObject({ channel: '*', peer: '*', agent: 'helper', reload: true });
    expect(parsedOptions(['route', 'remove', '--channel', 'telegram:main']).options).toMatchObject({ channel: 'telegram:main', peer: '*' });
  });
});

describe('xgw config edits', () => {
  it("append in the file's own style, keeping its comments and order, written 0600", async () => {
    write(`# mine
channels:
  # the page
  - { id: webchat:main, type: webchat, port: 0, access: open }   # a long comment that goes past eighty characters, which must stay on its line
  - id: terminal:local
    type: terminal
routes: []
`);
    const result = await addChannel(t.home, 'telegram:main', { tokenEnv: 'TG', access: 'allowlist', allow: ['12'] }, { env: { TG: 'x' } });
    expect(result).toMatchObject({ entries: [{ id: 'telegram:main', type: 'telegram', access: 'allowlist', allow: ['12'], token_env: 'TG' }], applied: { not_applied: 'not_running' }, findings: [] });
    await addRoute(t.home, { channel: 'telegram:main', peer: '*', agent: 'admin' });
    expect(readFileSync(file(), 'utf8')).toBe(`# mine
channels:
  # the page
  - { id: webchat:main, type: webchat, port: 0, access: open } # a long comment that goes past eighty characters, which must stay on its line
  - id: terminal:local
    type: terminal
  - { id: telegram:main, type: telegram, access: allowlist, allow: [ "12" ], token_env: TG }
routes:
  - { channel: telegram:main, peer: "*", agent: admin }
`);
    expect(statSync(file()).mode & 0o777).toBe(0o600);
    await removeRoute(t.home, { channel: 'telegram:main', peer: '*' });
    await removeChannel(t.home, 'telegram:main');
    expect(inspectXgwConfig(t.home).config).toMatchObject({ channels: [{ id: 'webchat:main' }, { id: 'terminal:local' }], routes: [] });
    expect(readFileSync(file(), 'utf8')).toContain('# the page\n');
  });

  it('start from the config theclaw up writes when there is none', async () => {
    startedInbox(t.home, 'helper');
    await addRoute(t.home, { channel: 'webchat:main', peer: '*', agent: 'helper' });
    // yaml keeps a comment on its line, after one space.
    expect(readFileSync(file(), 'utf8')).toBe(`${DEFAULT_XGW_CONFIG.replace('}   # the token', '} # the token')}  - { channel: webchat:main, peer: "*", agent: helper }\n`);
  });

  it('refuse duplicates, unknown ids and a change the config would not pass, as usage errors that change nothing', async () => {
    const config = `${DEFAULT_XGW_CONFIG}  - { channel: webchat:main, peer: "*", agent: admin }\n`;
    write(config);
    const refusals = [
      [() => addChannel(t.home, 'webchat:main', {}), 'channel webchat:main is configured already'],
      [() => addChannel(t.home, 'webchat:second', {}), 'the change would make an invalid'], // the default port is taken by webchat:main
      [() => addChannel(t.home, 'telegram:main', { port: 80 }), 'unknown key port'],
      [() => removeChannel(t.home, 'telegram:nope'), 'no channel telegram:nope is configured'],
      [() => removeChannel(t.home, 'webchat:main'), '1 route(s) send the messages of webchat:main'],
      [() => addRoute(t.home, { channel: '*', peer: '*', agent: 'other' }), 'a route for channel * and peer * exists already (to admin)'],
      [() => addRoute(t.home, { channel: 'telegram:main', peer: '*', agent: 'admin' }), 'no channel telegram:main is configured'],
      [() => removeRoute(t.home, { channel: 'terminal:local', peer: '*' }), 'no route for channel terminal:local and peer *'],
    ] as const;
    for (const [edit, message] of refusals) {
      const error = await rejection(edit());
      expect(error.kind, error.message).toBe('usage');
      expect(error.message).toContain(message);
      expect(error.suggestion).toBeTruthy();
    }
    expect(readFileSync(file(), 'utf8')).toBe(config);
    expect(existsSync(join(t.home, 'xgw', `config.yaml.${process.pid}.tmp`))).toBe(false);
  });

  it('refuse to edit a file that has a problem already, naming it', async () => {
    write('channels:\n  - { id: webchat:main, type: webchat, port: 99999 }\n');
    const error = await rejection(addRoute(t.home, { channel: '*', peer: '*', agent: 'admin' }));
    expect(error.kind).toBe('invalid');
    expect(error.message).toContain('channels.0.port');
    expect(error.suggestion).toBe('fix these first (xgw config check lists them), then try again');
  });
});
