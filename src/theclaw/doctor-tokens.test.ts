import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, type TestHome } from '../testing/index.js';
import { doctor } from './doctor.js';

// doctor's check of the bot token variables the channels name, for every channel type that has one.

let t: TestHome;
beforeEach(() => {
  t = createTestHome();
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeFileSync(
    join(t.home, 'xgw', 'config.yaml'),
    `channels:
  - { id: telegram:main, type: telegram, token_env: DOCTOR_TG_TOKEN }
  - { id: discord:main, type: discord, token_env: DOCTOR_DISCORD_TOKEN }
`,
  );
});
afterEach(() => t.cleanup());

describe('theclaw doctor: bot tokens', () => {
  it('fails for each channel whose token variable is not set, Discord as Telegram, and passes once it is', async () => {
    const tokenChecks = async (env: NodeJS.ProcessEnv) => (await doctor(t.home, env, Date.now(), { offline: true })).filter((check) => check.detail?.includes('is not set in this environment'));
    expect(await tokenChecks(t.env)).toEqual([
      { name: 'config', status: 'fail', detail: 'telegram:main: DOCTOR_TG_TOKEN is not set in this environment, so xgw cannot start', fix: 'export DOCTOR_TG_TOKEN=<the bot token> before theclaw up' },
      {
        name: 'config',
        status: 'fail',
        detail: 'discord:main: DOCTOR_DISCORD_TOKEN is not set in this environment, so xgw cannot start',
        fix: 'export DOCTOR_DISCORD_TOKEN=<the bot token> before theclaw up',
      },
    ]);
    expect(await tokenChecks({ ...t.env, DOCTOR_TG_TOKEN: 'x'.repeat(20), DOCTOR_DISCORD_TOKEN: 'y'.repeat(20) })).toEqual([]);
  });
});
