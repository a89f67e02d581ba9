import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestHome, runTool, type TestHome } from '../testing/index.js';
import type { SystemStatus } from './status.js';

/**
 * A pai config that cannot be read hides only the model from `theclaw status`: before, status
 * failed whole with the config's error, and the owner saw neither the daemons nor the agents.
 */

let t: TestHome | undefined;

afterEach(() => {
  t?.cleanup();
  t = undefined;
});

describe('theclaw status with a broken pai config', () => {
  it('shows the daemons and agents, and the model as unknown with the config error', async () => {
    t = createTestHome();
    expect((await runTool('agent', ['init', 'admin'], t.env)).code).toBe(0);
    mkdirSync(join(t.home, 'pai'), { recursive: true });
    writeFileSync(join(t.home, 'pai', 'config.yaml'), 'timeout_seconds: soon\n');

    const text = await runTool('theclaw', ['status'], t.env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^notifier +stopped$/m);
    expect(text.stdout).toMatch(/^ {2}admin +stopped/m);
    expect(text.stdout).toMatch(/^model: UNKNOWN: .*pai[/\\]config\.yaml.*timeout_seconds/m);

    const json = await runTool('theclaw', ['status', '--json'], t.env);
    expect(json.code).toBe(0);
    const status = JSON.parse(json.stdout) as SystemStatus;
    expect(status.model.problem).toMatch(/timeout_seconds/);
    expect(status.agents.map((agent) => agent.id)).toEqual(['admin']);
  });
});
