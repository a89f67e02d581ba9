import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hostName } from './host.js';

describe('hostName', () => {
  const home = mkdtempSync(join(tmpdir(), 'host-'));

  it('takes THECLAW_HOST first, then host: in config.yaml, then the machine name', () => {
    expect(hostName(home, { THECLAW_HOST: 'b-2' })).toBe('b-2');
    expect(hostName(home, {})).toMatch(/^[a-z0-9][a-z0-9._-]*$/);
    writeFileSync(join(home, 'config.yaml'), 'host: alpha\nstore: sqlite\n');
    expect(hostName(home, {})).toBe('alpha');
    expect(hostName(home, { THECLAW_HOST: 'beta' })).toBe('beta');
  });

  it('refuses a name that could not name a host, saying where it was set', () => {
    expect(() => hostName(home, { THECLAW_HOST: 'Bad Host' })).toThrow(/THECLAW_HOST "Bad Host" is not a host name/);
    expect(() => hostName(home, { THECLAW_HOST: '../x' })).toThrow(/not a host name/);
  });
});
