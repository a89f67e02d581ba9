import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasChromium } from '../testing/browser.js';
import { startFormSite, type FormSite } from '../testing/form-site.js';
import { rejection } from '../testing/index.js';
import { createAddressGuard } from '../web/index.js';
import { AgentBrowser } from './session.js';
import { DEFAULT_BROWSER_LIMITS } from './types.js';
import { rebindingDns } from '../testing/rebinding-dns.js';

// DNS rebinding, on loopback: 127.0.0.1 is allowed, 127.0.0.2 stands for the owner's network. The
// guard's DNS is a stand-in: site.test is always 127.0.0.1; rebind.test is 127.0.0.1 at its first
// lookup and 127.0.0.2 at every later one. Chromium's own resolver is told both names are
// 127.0.0.2 (--host-resolver-rules), as a later lookup would answer it: whatever reaches the
// listener on 127.0.0.2 got past the guard. The AgentBrowser runs in-process (the service's
// socket is not what is tested).

let site: FormSite;
let internal: Server;
let internalPort: number;
let internalConnections = 0;
let profile: string;
let browser: AgentBrowser;
const { resolve, lookups } = rebindingDns();

describe.skipIf(!hasChromium)('the browser against DNS rebinding', { timeout: 60_000 }, () => {
  beforeAll(async () => {
    site = await startFormSite();
    internal = createServer((socket) => {
      internalConnections++;
      socket.destroy();
    });
    await new Promise<void>((done) => internal.listen(0, '127.0.0.2', done));
    internalPort = (internal.address() as AddressInfo).port;
    profile = mkdtempSync(join(tmpdir(), 'theclaw-rebinding-'));
    browser = new AgentBrowser(
      profile,
      () => ({ ...DEFAULT_BROWSER_LIMITS, navigation_timeout_seconds: 10 }),
      () => createAddressGuard(['127.0.0.1']),
      { resolve, chromiumArgs: ['--host-resolver-rules=MAP site.test 127.0.0.2, MAP rebind.test 127.0.0.2'] },
    );
  });
  afterAll(async () => {
    await browser?.close();
    await site?.close();
    internal?.close();
    rmSync(profile, { recursive: true, force: true });
  });

  it('connects to the address the guard checked, not to the one Chromium would resolve', async () => {
    const url = site.url('/form').replace('127.0.0.1', 'site.test');
    expect((await browser.run({ name: 'open', url })).text).toContain(`Opened ${url}`);
    expect((await browser.run({ name: 'snapshot' })).text).toContain('Book a crossing');
    expect(internalConnections).toBe(0);
  });

  it('refuses a name whose answer changes to a refused address after the first lookup, for http and https', async () => {
    for (const scheme of ['http', 'https']) {
      lookups.delete('rebind.test');
      const error = await rejection(browser.run({ name: 'open', url: `${scheme}://rebind.test:${internalPort}/` }));
      expect(error.message, scheme).toBe(`refused to open rebind.test:${internalPort}: 127.0.0.2 is a loopback address`);
      // The refusal names the address of a later lookup: the route's check (the first) had passed it.
      expect(lookups.get('rebind.test'), scheme).toBeGreaterThanOrEqual(2);
    }
    expect(internalConnections).toBe(0);
  });
});
