import { execFileSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestHome, expectClawError, PROVIDER_KEYS, runTool, webchatOnFreePort, type TestHome } from '../testing/index.js';
import { secretsEnvPath } from './layout.js';
import { readSecretsFile, storeSecret, withStoredSecrets } from './secrets-file.js';

let t: TestHome | undefined;
afterEach(() => t?.cleanup());

describe('secrets.env', () => {
  it('stores a key 0600, replaces it in place keeping the other lines and comments, and reads it back', () => {
    t = createTestHome();
    storeSecret(t.home, 'OPENAI_API_KEY', 'sk-first-0123456789');
    expect(statSync(secretsEnvPath(t.home)).mode & 0o777).toBe(0o600);
    writeFileSync(secretsEnvPath(t.home), `${readFileSync(secretsEnvPath(t.home), 'utf8')}# mine\nexport OTHER_TOKEN="quoted value"\n`, { mode: 0o644 });
    storeSecret(t.home, 'OPENAI_API_KEY', 'sk-second-0123456789');
    const text = readFileSync(secretsEnvPath(t.home), 'utf8');
    expect(text).not.toContain('sk-first');
    expect(text).toContain('# mine\n');
    expect(text.match(/OPENAI_API_KEY=/g)).toHaveLength(1);
    expect(statSync(secretsEnvPath(t.home)).mode & 0o777).toBe(0o600);
    expect(readSecretsFile(t.home)).toEqual({ OPENAI_API_KEY: 'sk-second-0123456789', OTHER_TOKEN: 'quoted value' });
  });

  it('refuses a value that would not read back the same, and leaves the file as it was', () => {
    t = createTestHome();
    storeSecret(t.home, 'A_TOKEN', 'kept-0123456789');
    for (const value of ['', 'two\nlines', 'a"quote', ' padded ']) expectClawError(() => storeSecret(t!.home, 'A_TOKEN', value), 'usage');
    expect(readSecretsFile(t.home)).toEqual({ A_TOKEN: 'kept-0123456789' });
  });

  it('a variable set in the environment wins over the file', () => {
    t = createTestHome();
    storeSecret(t.home, 'OPENAI_API_KEY', 'sk-from-file-0123456789');
    storeSecret(t.home, 'TELEGRAM_BOT_TOKEN', '1:from-file-0123456789');
    const env = withStoredSecrets(t.home, { OPENAI_API_KEY: 'sk-from-env-0123456789' });
    expect(env.OPENAI_API_KEY).toBe('sk-from-env-0123456789');
    expect(env.TELEGRAM_BOT_TOKEN).toBe('1:from-file-0123456789');
  });

  it('theclaw doctor and up read it: the daemons start with the key, which no process list shows', async () => {
    t = createTestHome();
    for (const key of PROVIDER_KEYS) delete t.env[key];
    const key = 'sk-secrets-file-test-4f9a2c';
    storeSecret(t.home, 'OPENAI_API_KEY', key);
    const doctor = await runTool('theclaw', ['doctor', '--offline', '--json'], t.env);
    const providers = (JSON.parse(doctor.stdout) as { checks: { name: string; status: string; detail: string }[] }).checks.find((check) => check.name === 'providers');
    expect(providers).toMatchObject({ status: 'ok', detail: expect.stringContaining('agents use openai/gpt-4o-mini') });
    webchatOnFreePort(t.home);
    const up = await runTool('theclaw', ['up', '--json'], t.env);
    try {
      expect(up.code, up.stderr || up.stdout).toBe(0);
      expect(JSON.parse(up.stdout).model).toEqual({ provider: 'openai', model: 'gpt-4o-mini', offline: false });
      const status = await runTool('theclaw', ['status', '--json'], t.env);
      expect(JSON.parse(status.stdout).shell_model).toBeUndefined(); // the shell's view counts the file too
      const notifierPid = JSON.parse(up.stdout).notifier.pid as number;
      expect(readFileSync(`/proc/${notifierPid}/environ`, 'utf8').split('\0')).toContain(`OPENAI_API_KEY=${key}`);
      expect(execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })).not.toContain(key);
    } finally {
      await runTool('theclaw', ['down'], t.env);
    }
  });
});
