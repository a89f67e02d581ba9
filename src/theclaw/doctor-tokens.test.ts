import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, runTool, startedInbox, type TestHome } from '../testing/index.js';
import { doctor } from './doctor.js';

// theclaw doctor and xgw config check take one verdict on the gateway config (inspectXgwConfig):
// a bot token variable that is not set fails both; a route to an agent that does not exist warns in both.

let t: TestHome;
beforeEach(() => {
  t = createTestHome();
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeFileSync(
    join(t.home, 'xgw', 'config.yaml'),
    `channels:
  - { id: telegram:main, type: telegram, token_env: DOCTOR_TG_TOKEN }
  - { id: discord:main, type: discord, token_env: DOCTOR_DISCORD_TOKEN }
routes:
  - { channel: telegram:main, agent: admin }
  - { channel: discord:main, agent: ghost }
`,
  );
  startedInbox(t.home); // admin exists, ghost does not
});
afterEach(() => t.cleanup());

interface Verdict {
  severity: string;
  message: string;
  fix?: string;
}

/** doctor's findings about the gateway config, as config check words them. */
async function doctorVerdict(env: NodeJS.ProcessEnv): Promise<Verdict[]> {
  const checks = (await doctor(t.home, env, Date.now(), { offline: true, bwrap: null, chromium: null })).filter((check) => check.name === 'config' && check.detail.startsWith('xgw: '));
  return checks.map((check) => ({ severity: check.status, message: check.detail.slice('xgw: '.length), fix: check.fix }));
}

async function configCheckVerdict(env: NodeJS.ProcessEnv): Promise<{ code: number | null; findings: Verdict[] }> {
  const result = await runTool('xgw', ['config', 'check', '--json'], env);
  return { code: result.code, findings: (JSON.parse(result.stdout) as { findings: Verdict[] }).findings };
}

const TOKENS = { DOCTOR_TG_TOKEN: 'x'.repeat(20), DOCTOR_DISCORD_TOKEN: 'y'.repeat(20) };

describe('theclaw doctor and xgw config check', () => {
  it('fail both for each unset bot token variable, Discord as Telegram, and warn both of a route to a missing agent', async () => {
    const expected = [
      {
        severity: 'fail',
        message: 'telegram:main: DOCTOR_TG_TOKEN is not set in this environment, so xgw cannot start it',
        fix: 'export DOCTOR_TG_TOKEN=<the bot token> before theclaw up',
      },
      {
        severity: 'fail',
        message: 'discord:main: DOCTOR_DISCORD_TOKEN is not set in this environment, so xgw cannot start it',
        fix: 'export DOCTOR_DISCORD_TOKEN=<the bot token> before theclaw up',
      },
      {
        severity: 'warn',
        message: 'routes.1: agent ghost does not exist, so the messages routed to it get a notice instead of an answer',
        fix: 'create it with: agent init ghost && agent start ghost, or route to another agent',
      },
    ];
    expect(await doctorVerdict(t.env)).toEqual(expected);
    expect(await configCheckVerdict(t.env)).toEqual({ code: 1, findings: expected });
  });

  it("fail both for each of a Slack channel's two token variables that is not set, naming what it holds", async () => {
    writeFileSync(join(t.home, 'xgw', 'config.yaml'), 'channels:\n  - { id: slack:main, type: slack, token_env: DOCTOR_SLACK_BOT, app_token_env: DOCTOR_SLACK_APP }\n');
    const unset = (variable: string, holds: string) => ({
      severity: 'fail',
      message: `slack:main: ${variable} is not set in this environment, so xgw cannot start it`,
      fix: `export ${variable}=<${holds}> before theclaw up`,
    });
    expect(await doctorVerdict(t.env)).toEqual([unset('DOCTOR_SLACK_BOT', 'the bot token'), unset('DOCTOR_SLACK_APP', 'the app-level token')]);
    expect(await configCheckVerdict({ ...t.env, DOCTOR_SLACK_BOT: 'xoxb-1' })).toEqual({ code: 1, findings: [unset('DOCTOR_SLACK_APP', 'the app-level token')] });
  });

  it('pass both once the tokens are set, warning both of the missing agent, and neither once it exists', async () => {
    const env = { ...t.env, ...TOKENS };
    expect((await doctorVerdict(env)).map((v) => v.severity)).toEqual(['warn']);
    // One verdict on the configs: no "configs are valid" line under the warning.
    const configLines = (await doctor(t.home, env, Date.now(), { offline: true, bwrap: null, chromium: null })).filter((check) => check.name === 'config');
    expect(configLines.map((check) => check.status)).toEqual(['warn']);
    expect(await configCheckVerdict(env)).toMatchObject({ code: 0, findings: [{ severity: 'warn', message: expect.stringContaining('agent ghost does not exist') }] });
    const human = await runTool('xgw', ['config', 'check'], env);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('warning: routes.1: agent ghost does not exist, so the messages routed to it get a notice instead of an answer (create it with: agent init ghost');

    expect((await runTool('agent', ['init', 'ghost'], env)).code).toBe(0);
    expect(await doctorVerdict(env)).toEqual([]);
    expect((await doctor(t.home, env, Date.now(), { offline: true, bwrap: null, chromium: null })).filter((check) => check.name === 'config')).toEqual([
      { name: 'config', status: 'ok', detail: 'pai, notifier, xgw and agent configs are valid' },
    ]);
    expect(await configCheckVerdict(env)).toEqual({ code: 0, findings: [] });
  });
});
