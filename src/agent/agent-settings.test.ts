import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, expectClawError, rejection, type TestHome } from '../testing/index.js';
import { agentDir, loadAgentConfig } from './agent-dir.js';
import { setConfigKey, setIdentity } from './agent-settings.js';
import { initAgent } from './lifecycle.js';

let t: TestHome;

beforeEach(async () => {
  t = createTestHome();
  await initAgent(t.home, 'gardener');
});

afterEach(() => t.cleanup());

const dir = () => agentDir(t.home, 'gardener');

describe('agent config set', () => {
  it('sets a nested key, read as YAML, keeping the rest of the file', () => {
    expect(setConfigKey(t.home, 'gardener', 'context.recent_messages', '40')).toBe(40);
    expect(setConfigKey(t.home, 'gardener', 'pai.fallbacks', '[openai/gpt-4o-mini]')).toEqual(['openai/gpt-4o-mini']);
    const config = loadAgentConfig(dir());
    expect(config.context.recent_messages).toBe(40);
    expect(config.pai.fallbacks).toEqual(['openai/gpt-4o-mini']);
    expect(config.concurrency).toBe(4);
  });

  it('refuses a value or key the config cannot take, and leaves the file as it was', () => {
    const before = readFileSync(dir().config, 'utf8');
    expect(expectClawError(() => setConfigKey(t.home, 'gardener', 'concurrency', 'four'), 'usage').message).toMatch(/^invalid concurrency for gardener: concurrency: /);
    expectClawError(() => setConfigKey(t.home, 'gardener', 'no_such_key', '1'), 'usage');
    expectClawError(() => setConfigKey(t.home, 'gardener', 'Pai.Model', 'x'), 'usage');
    expect(readFileSync(dir().config, 'utf8')).toBe(before);
  });
});

describe('agent identity set', () => {
  it('replaces IDENTITY.md whole', async () => {
    await setIdentity(t.home, 'gardener', '# gardener\n\nI keep the garden notes.', t.env);
    expect(readFileSync(dir().identity, 'utf8')).toBe('# gardener\n\nI keep the garden notes.\n');
  });

  it('refuses an empty identity and keeps the old one', async () => {
    const before = readFileSync(dir().identity, 'utf8');
    expect((await rejection(setIdentity(t.home, 'gardener', '  \n', t.env))).kind).toBe('usage');
    expect(readFileSync(dir().identity, 'utf8')).toBe(before);
  });
});
