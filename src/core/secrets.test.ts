import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestHome, type TestHome } from '../testing/index.js';
import { configuredSecrets, createRedactor, withoutSecrets } from './secrets.js';

let t: TestHome | undefined;
afterEach(() => t?.cleanup());

function homeWith(files: Record<string, string>): NodeJS.ProcessEnv {
  t = createTestHome();
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(join(t.home, file, '..'), { recursive: true });
    writeFileSync(join(t.home, file), text);
  }
  return { THECLAW_HOME: t.home };
}

describe('secrets named by the configs', () => {
  it('takes every token_env, password_env and api_key_env, in block or flow style, quoted or not, and the keys pai holds inline', () => {
    const env = homeWith({
      'xgw/config.yaml':
        'channels:\n  - { id: telegram:a, type: telegram, token_env: TG_BOT }\n  - id: telegram:b\n    type: telegram\n    token_env: "OTHER_BOT"\n  - { id: email:a, type: email, password_env: MAILBOX_PW }\n',
      'pai/config.yaml': "providers:\n  p:\n    api_key_env: 'MODEL_CREDENTIAL'\n  q: { api_key: inline-key-12345, models: [] }\n",
    });
    expect(configuredSecrets(env)).toEqual({ names: ['TG_BOT', 'OTHER_BOT', 'MAILBOX_PW', 'MODEL_CREDENTIAL'], values: ['inline-key-12345'] });
  });

  it('removes those variables from a tool environment and redacts their values and the inline keys', () => {
    const env: NodeJS.ProcessEnv = {
      ...homeWith({ 'xgw/config.yaml': 'channels: [{ id: telegram:a, type: telegram, token_env: TG_BOT }]\n', 'pai/config.yaml': 'providers: { p: { api_key: inline-key-12345 } }\n' }),
      TG_BOT: '123456:bot-token-value',
      PLAIN: 'kept as it is',
    };
    expect(withoutSecrets(env)).toEqual({ THECLAW_HOME: env.THECLAW_HOME, PLAIN: 'kept as it is' });
    const redact = createRedactor(env);
    expect(redact('bot 123456:bot-token-value, key inline-key-12345, kept as it is')).toBe('bot [redacted], key [redacted], kept as it is');
  });

  it("redacts the store URL's password and secret query values, not the rest of the URL, which status lines name", () => {
    const env: NodeJS.ProcessEnv = { ...homeWith({}), THECLAW_DATABASE_URL: 'postgres://claw:s3cret-pw%2F1@db.example:5432/theclaw?sslpassword=key-pass-99&sslmode=require' };
    expect(withoutSecrets(env)).toEqual({ THECLAW_HOME: env.THECLAW_HOME });
    const redact = createRedactor(env);
    expect(redact(`in ${env.THECLAW_DATABASE_URL}`)).toBe('in [redacted]');
    expect(redact('pw s3cret-pw/1, ssl key-pass-99, threads in postgres://claw@db.example:5432/theclaw')).toBe('pw [redacted], ssl [redacted], threads in postgres://claw@db.example:5432/theclaw');
    const noPassword = createRedactor({ ...homeWith({}), THECLAW_DATABASE_URL: 'postgres://claw@db.example:5432/theclaw' });
    expect(noPassword('threads in postgres://claw@db.example:5432/theclaw')).toBe('threads in postgres://claw@db.example:5432/theclaw');
  });

  it("takes every variable of pai's api_key_envs, as a flow list or a block list, comments left out", () => {
    const env = homeWith({
      'pai/config.yaml': [
        'providers:',
        '  openai: { api_key_envs: [OPENAI_KEY_1, "OPENAI_KEY_2"], models: [] }',
        '  other:',
        '    api_key_envs:   # the work keys',
        '      - WORK_KEY_A',
        "      - 'WORK_KEY_B'  # PATH is no key",
        '    models: []',
        '',
      ].join('\n'),
    });
    expect(configuredSecrets(env).names.sort()).toEqual(['OPENAI_KEY_1', 'OPENAI_KEY_2', 'WORK_KEY_A', 'WORK_KEY_B']);
    const tool = withoutSecrets({ ...env, OPENAI_KEY_1: 'k1', OPENAI_KEY_2: 'k2', WORK_KEY_B: 'kb', PATH: '/usr/bin' });
    expect(tool).toEqual({ THECLAW_HOME: env.THECLAW_HOME, PATH: '/usr/bin' });
  });

  it('finds nothing in a home without configs', () => {
    expect(configuredSecrets(homeWith({}))).toEqual({ names: [], values: [] });
  });
});
