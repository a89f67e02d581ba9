import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFormSite, type FormSite } from '../testing/form-site.js';
import { createAddressGuard } from '../web/index.js';
import { startGuardProxy, type GuardProxy } from './guard-proxy.js';
import { rebindingDns } from '../testing/rebinding-dns.js';

// The proxy on its own, spoken to as Chromium speaks to it (absolute-form GET, CONNECT), with a
// stand-in DNS: site.test is 127.0.0.1 (allowed); rebind.test is 127.0.0.1 at its first lookup and
// 127.0.0.2 (refused) after. Nothing may reach the listener on 127.0.0.2.

let site: FormSite;
let proxy: GuardProxy;
let internal: Server;
let internalPort: number;
let internalConnections = 0;
const refusals: [string, string][] = [];
const { resolve, lookups } = rebindingDns();

/** What the proxy answers to `request` (raw HTTP), up to the end of its head, or all of it when it closes. */
function ask(request: string): Promise<string> {
  const { port } = new URL(proxy.server);
  return new Promise((done, fail) => {
    let answer = '';
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(request));
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer to ${request.split('\r\n')[0]}`)));
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      if (request.startsWith('CONNECT') && answer.includes('\r\n\r\n')) socket.destroy();
    });
    socket.on('close', () => done(answer));
    socket.on('error', fail);
  });
}

describe('the guard proxy', () => {
  beforeAll(async () => {
    site = await startFormSite();
    internal = createServer((socket) => {
      internalConnections++;
      socket.destroy();
    });
    await new Promise<void>((done) => internal.listen(0, '127.0.0.2', done));
    internalPort = (internal.address() as AddressInfo).port;
    proxy = await startGuardProxy(
      () => createAddressGuard(['127.0.0.1']),
      (target, reason) => refusals.push([target, reason]),
      resolve,
    );
  });
  afterAll(async () => {
    await proxy?.close();
    await site?.close();
    internal?.close();
  });

  it('forwards a GET for an allowed name to the address it checked', async () => {
    const port = new URL(site.url('/')).port;
    const answer = await ask(`GET http://site.test:${port}/form HTTP/1.1\r\nHost: site.test:${port}\r\nConnection: close\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain('Book a crossing');
  });

  it('refuses a refused address, and a name whose later lookup gives one, for GET and CONNECT', async () => {
    refusals.length = 0;
    expect(await ask(`GET http://127.0.0.2:${internalPort}/ HTTP/1.1\r\nHost: 127.0.0.2\r\nConnection: close\r\n\r\n`)).toMatch(/^HTTP\/1\.1 403 [\s\S]*refused: 127\.0\.0\.2 is a loopback address/);
    lookups.clear();
    await resolve('rebind.test'); // the first lookup: an earlier check's
    expect(await ask(`CONNECT rebind.test:${internalPort} HTTP/1.1\r\nHost: rebind.test:${internalPort}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 403 /);
    expect(refusals).toEqual([
      [`http://127.0.0.2:${internalPort}/`, '127.0.0.2 is a loopback address'],
      [`rebind.test:${internalPort}`, '127.0.0.2 is a loopback address'],
    ]);
    expect(internalConnections).toBe(0);
  });

  it('answers a CONNECT it cannot read with 400, and keeps serving', async () => {
    expect(await ask('CONNECT site.test:99999 HTTP/1.1\r\nHost: x\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    expect(await ask('CONNECT [::1 HTTP/1.1\r\nHost: x\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    const port = new URL(site.url('/')).port;
    expect(await ask(`CONNECT site.test:${port} HTTP/1.1\r\nHost: site.test:${port}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200 Connection Established/);
  });
});
