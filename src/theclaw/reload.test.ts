import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestHome, PROVIDER_KEYS, runTool, threadEvents, type TestHome } from '../testing/index.js';
import { connectWebchat, type WebchatClient } from '../xgw/index.js';
import type { SystemStatus } from './status.js';
import type { ReloadOutcome } from './system.js';

/**
 * `theclaw reload`, and the line of `theclaw status` and `theclaw up` that asks for it, against
 * the real system: the built CLIs in a temp THECLAW_HOME and the daemons `theclaw up` starts
 * (the offline mock model), the web chat reached the way its page reaches it.
 */

let t: TestHome;
let chat: WebchatClient | undefined;

afterEach(async () => {
  chat?.close();
  chat = undefined;
  await runTool('theclaw', ['down'], t.env);
  t.cleanup();
});

async function up(): Promise<void> {
  t = createTestHome();
  for (const key of PROVIDER_KEYS) delete t.env[key];
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeFileSync(
    join(t.home, 'xgw', 'config.yaml'),
    `channels:\n  - { id: webchat:main, type: webchat, port: 0, access: open }\n  - { id: terminal:local, type: terminal, access: open }\nroutes:\n  - { channel: "*", peer: "*", agent: admin }\n`,
  );
  const result = await run('theclaw', ['up']);
  expect(result.code, result.stderr).toBe(0);
}

function run(tool: 'theclaw' | 'xgw', args: string[]) {
  return runTool(tool, args, t.env);
}

async function statusOf(): Promise<SystemStatus> {
  const result = await run('theclaw', ['status', '--json']);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as SystemStatus;
}

const inboxTexts = (agent: string) => threadEvents(t.home, join(t.home, 'agents', agent, 'inbox')).map((event) => JSON.parse(event.content).text as string);

describe('theclaw reload', () => {
  it('status and up say which config changed since its daemon loaded it; reload applies both, and the next web chat message goes to the new route over the same connection', async () => {
    await up();
    expect((await statusOf()).config_changed).toEqual([]);
    const url = (await statusOf()).channels.find((channel) => channel.id === 'webchat:main')!.url!;
    chat = await connectWebchat(url);
    await chat.send('to admin');
    expect((await chat.nextReply()).text).toContain('admin');

    expect((await run('xgw', ['route', 'add', '--channel', 'webchat:main', '--agent', 'warden', '--no-reload'])).code).toBe(0);
    mkdirSync(join(t.home, 'notifier'), { recursive: true });
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: 2\n');
    expect((await statusOf()).config_changed).toEqual([
      { daemon: 'notifier', file: 'notifier/config.yaml', message: 'notifier/config.yaml changed since notifier loaded it - run theclaw reload' },
      { daemon: 'xgw', file: 'xgw/config.yaml', message: 'xgw/config.yaml changed since xgw loaded it - run theclaw reload' },
    ]);
    expect((await run('theclaw', ['status'])).stdout).toContain('\nconfig    xgw/config.yaml changed since xgw loaded it - run theclaw reload\n');
    const again = await run('theclaw', ['up']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain('Warning: notifier/config.yaml changed since notifier loaded it - run theclaw reload\nWarning: xgw/config.yaml changed since xgw loaded it - run theclaw reload\n');

    const reload = await run('theclaw', ['reload']);
    expect(reload.code, reload.stderr).toBe(0);
    expect(reload.stdout).toMatch(/^notifier reloaded .*notifier\/config\.yaml: applied sweep_interval_seconds\nxgw reloaded .*xgw\/config\.yaml: applied the routes\n$/);
    expect((await statusOf()).config_changed).toEqual([]);
    expect((await run('theclaw', ['status'])).stdout).not.toContain('changed since');
    expect((await run('theclaw', ['up'])).stderr).not.toContain('changed since');

    await chat.send('to warden');
    expect((await chat.nextReply()).text).toContain('warden');
    expect(inboxTexts('warden')).toEqual(['to warden']);
    expect(inboxTexts('admin')).toEqual(['to admin']);
  });

  it('refuses a config with a problem with the error of xgw config check, reloads the other daemon, and the running gateway goes on as it was; two refusals say both fixes', async () => {
    await up();
    const file = join(t.home, 'xgw', 'config.yaml');
    writeFileSync(file, `${readFileSync(file, 'utf8')}  - { channel: telegram:main, agent: warden }\n`);
    const check = await run('xgw', ['config', 'check']);
    expect(check.code).toBe(1);
    const reload = await run('theclaw', ['reload', '--json']);
    expect(reload.code).toBe(1);
    const outcomes = (JSON.parse(reload.stdout) as { ok: boolean; daemons: ReloadOutcome[] }).daemons;
    expect(outcomes.map((outcome) => [outcome.daemon, outcome.state])).toEqual([
      ['notifier', 'reloaded'],
      ['xgw', 'refused'],
    ]);
    const human = await run('theclaw', ['reload']);
    expect(human.code).toBe(1);
    expect(human.stdout).toContain('xgw refused its config and runs on with the one it had');
    expect(human.stderr).toBe(check.stderr);
    expect(human.stderr).toMatch(/^Error: invalid .*xgw\/config\.yaml: routes\.1\.channel: no channel telegram:main is configured - /);
    expect((await statusOf()).config_changed.map((changed) => changed.daemon)).toEqual(['xgw']);

    const url = (await statusOf()).channels.find((channel) => channel.id === 'webchat:main')!.url!;
    chat = await connectWebchat(url);
    await chat.send('still admin');
    expect((await chat.nextReply()).text).toContain('admin');

    // Both refuse, each saying why and how to fix it. The bot token was stored (as theclaw setup
    // does) after xgw started, so the fix is a restart, not an export.
    writeFileSync(file, readFileSync(file, 'utf8').replace('  - { channel: telegram:main, agent: warden }\n', '').replace('channels:\n', 'channels:\n  - { id: telegram:main, type: telegram }\n'));
    writeFileSync(join(t.home, 'secrets.env'), 'TELEGRAM_BOT_TOKEN=123456:stored-by-setup\n', { mode: 0o600 });
    mkdirSync(join(t.home, 'notifier'), { recursive: true });
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: -3\n');
    const both = await run('theclaw', ['reload']);
    expect(both.code).toBe(1);
    expect(both.stdout).toBe('notifier refused its config and runs on with the one it had\nxgw refused its config and runs on with the one it had\n');
    expect(both.stderr).toMatch(
      /^Error: invalid \S+notifier\/config\.yaml: sweep_interval_seconds: [^;]+; invalid \S+xgw\/config\.yaml: telegram:main: TELEGRAM_BOT_TOKEN is not set in the environment of the running xgw, so xgw cannot start it \(TELEGRAM_BOT_TOKEN is in \S+secrets\.env, which xgw reads when it starts: theclaw down && theclaw up\) - fix the listed fields or remove them to use the defaults; fix the listed entries; xgw config check shows them without starting\n$/,
    );

    await run('theclaw', ['down']);
    const stopped = await run('theclaw', ['reload']);
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).toBe('notifier is not running: it reads its config when it starts (theclaw up)\nxgw is not running: it reads its config when it starts (theclaw up)\n');
  });
});
