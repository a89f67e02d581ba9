import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, runTool, startedInbox, startFakeTelegram, type FakeTelegram, type TestHome } from '../testing/index.js';
import { doctor, type Check } from './doctor.js';

// theclaw doctor checks every configured channel: xgw's state of it while xgw runs, else (unless
// --offline) what the platform says of its token. A fake Telegram answers 401 for a wrong token.

let telegram: FakeTelegram;
let t: TestHome;

beforeAll(async () => {
  telegram = await startFakeTelegram();
});
afterAll(() => telegram.close());

beforeEach((context) => {
  t = createTestHome();
  context.onTestFinished(async () => {
    await runTool('xgw', ['stop'], t.env);
    t.cleanup();
  });
  startedInbox(t.home);
});

function configure(apiRoot = telegram.apiRoot): void {
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeFileSync(join(t.home, 'xgw', 'config.yaml'), `channels:\n  - { id: telegram:main, type: telegram, token_env: DOCTOR_TG_TOKEN, api_root: "${apiRoot}" }\nroutes:\n  - { agent: admin }\n`);
}

async function channelChecks(token: string, offline = false): Promise<Check[]> {
  return (await doctor(t.home, { ...t.env, DOCTOR_TG_TOKEN: token }, Date.now(), { offline, bwrap: null, chromium: null })).filter((check) => check.name === 'channels');
}

const REFUSED = {
  name: 'channels',
  status: 'fail',
  detail: 'telegram:main could not start: Telegram refused the bot token in DOCTOR_TG_TOKEN (401: Unauthorized)',
  fix: 'check the token with @BotFather and export it again as DOCTOR_TG_TOKEN',
};

describe('theclaw doctor and the channels, xgw down', () => {
  it("fails a Telegram channel whose token Telegram refuses, with the channel's fix, and passes one it accepts", async () => {
    configure();
    expect(await channelChecks('123:wrong')).toEqual([REFUSED]);
    expect(await channelChecks(telegram.token)).toEqual([{ name: 'channels', status: 'ok', detail: 'telegram:main could start: @theclaw_test_bot' }]);
  });

  it('fails a Telegram channel that cannot reach its api_root, and asks nothing when offline', async () => {
    const closed = await startFakeTelegram();
    const apiRoot = closed.apiRoot;
    await closed.close();
    configure(apiRoot);
    const [check] = await channelChecks(telegram.token);
    expect(check).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining(`telegram:main could not start: cannot reach the Telegram Bot API at ${apiRoot}`),
      fix: 'check the network and api_root; retry later',
    });
    expect(JSON.stringify(check)).not.toContain(telegram.token);
    expect(await channelChecks(telegram.token, true)).toEqual([]);
  });
});

describe('theclaw doctor and the channels, xgw up', () => {
  it("fails a channel xgw could not start, with the channel's own reason and fix, even offline", async () => {
    configure();
    const env = { ...t.env, DOCTOR_TG_TOKEN: '123:wrong' };
    expect((await runTool('xgw', ['start'], env)).code).toBe(0);
    expect(await channelChecks('123:wrong', true)).toEqual([
      {
        name: 'channels',
        status: 'fail',
        detail: 'telegram:main is not running: Telegram refused the bot token in DOCTOR_TG_TOKEN (401: Unauthorized)',
        fix: 'check the token with @BotFather and export it again as DOCTOR_TG_TOKEN, then restart xgw: theclaw down && theclaw up',
      },
    ]);
    const cli = await runTool('theclaw', ['doctor', '--offline'], env);
    expect(cli.code).toBe(1);
    expect(cli.stdout).toContain('telegram:main is not running: Telegram refused the bot token');
  });

  it('passes a channel that runs', async () => {
    configure();
    const env = { ...t.env, DOCTOR_TG_TOKEN: telegram.token };
    expect((await runTool('xgw', ['start'], env)).code).toBe(0);
    expect(await channelChecks(telegram.token, true)).toEqual([{ name: 'channels', status: 'ok', detail: 'telegram:main is running (@theclaw_test_bot)' }]);
  });
});
