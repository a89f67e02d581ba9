import { createServer, get, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkAddress, checkUrl, createAddressGuard, guardedLookup } from './guard.js';

const none = createAddressGuard();

describe('checkAddress', () => {
  const refused: [string, RegExp][] = [
    ['127.0.0.1', /loopback/],
    ['127.255.255.254', /loopback/],
    ['10.1.2.3', /private/],
    ['172.16.0.1', /private/],
    ['172.31.255.255', /private/],
    ['192.168.1.10', /private/],
    ['169.254.0.1', /link-local/],
    ['169.254.169.254', /metadata/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['100.127.255.255', /carrier-grade NAT/],
    ['0.0.0.0', /unspecified/],
    ['255.255.255.255', /broadcast/],
    ['224.0.0.1', /multicast/],
    ['::1', /loopback/],
    ['::', /unspecified/],
    ['fc00::1', /unique local/],
    ['fd12:3456::1', /unique local/],
    ['fe80::1', /link-local/],
    ['fd00:ec2::254', /metadata/],
    ['::ffff:127.0.0.1', /loopback/],
    ['::ffff:10.0.0.1', /private/],
    ['::ffff:169.254.169.254', /metadata/],
    ['::ffff:7f00:1', /loopback/],
    ['64:ff9b::a00:1', /reserved/],
    ['2002:a00:1::', /reserved/],
    ['not-an-ip', /not an IP/],
  ];

  it.each(refused)('refuses %s', (address, reason) => {
    const verdict = checkAddress(address, none);
    expect(verdict.allowed).toBe(false);
    expect(!verdict.allowed && verdict.reason).toMatch(reason);
  });

  it.each(['8.8.8.8', '93.184.216.34', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])('allows the public address %s', (address) => {
    expect(checkAddress(address, none)).toEqual({ allowed: true });
  });

  it('allows what allow_private names (addresses, CIDRs, host names), and the metadata address never', () => {
    const guard = createAddressGuard(['127.0.0.1', '192.168.1.0/24', '::1', 'nas.local', '169.254.0.0/16', '169.254.169.254', 'fd00::/8']);
    expect(checkAddress('127.0.0.1', guard).allowed).toBe(true);
    expect(checkAddress('::ffff:127.0.0.1', guard).allowed).toBe(true);
    expect(checkAddress('127.0.0.2', guard).allowed).toBe(false);
    expect(checkAddress('192.168.1.77', guard).allowed).toBe(true);
    expect(checkAddress('192.168.2.1', guard).allowed).toBe(false);
    expect(checkAddress('::1', guard).allowed).toBe(true);
    expect(checkAddress('10.0.0.5', guard, 'NAS.local.').allowed).toBe(true);
    expect(checkAddress('10.0.0.5', guard, 'other.local').allowed).toBe(false);
    expect(checkAddress('169.254.1.1', guard).allowed).toBe(true);
    expect(checkAddress('169.254.169.254', guard).allowed).toBe(false);
    expect(checkAddress('fd00:ec2::254', guard).allowed).toBe(false);
    expect(checkAddress('169.254.169.254', createAddressGuard(['metadata.internal']), 'metadata.internal').allowed).toBe(false);
  });

  const octet = fc.integer({ min: 0, max: 255 });
  const inRange = (first: number, second: fc.Arbitrary<number>) => fc.tuple(second, octet, octet).map(([b, c, d]) => `${first}.${b}.${c}.${d}`);
  const privateV4 = fc.oneof(
    inRange(10, octet),
    inRange(127, octet),
    inRange(172, fc.integer({ min: 16, max: 31 })),
    inRange(192, fc.constant(168)),
    inRange(169, fc.constant(254)),
    inRange(100, fc.integer({ min: 64, max: 127 })),
    inRange(0, octet),
  );

  it('refuses every address of the private IPv4 ranges, and each as IPv4-mapped IPv6 too', () => {
    fc.assert(
      fc.property(privateV4, (address) => {
        expect(checkAddress(address, none).allowed).toBe(false);
        expect(checkAddress(`::ffff:${address}`, none).allowed).toBe(false);
      }),
    );
  });

  it('gives an IPv4-mapped IPv6 address the verdict of its IPv4 address, for any address and allow list', () => {
    const v4 = fc.tuple(octet, octet, octet, octet).map((parts) => parts.join('.'));
    fc.assert(
      fc.property(
        v4,
        fc.array(
          fc.oneof(
            v4,
            fc.tuple(v4, fc.integer({ min: 8, max: 32 })).map(([a, bits]) => `${a}/${bits}`),
          ),
          { maxLength: 3 },
        ),
        (address, allow) => {
          const guard = createAddressGuard(allow);
          expect(checkAddress(`::ffff:${address}`, guard).allowed).toBe(checkAddress(address, guard).allowed);
        },
      ),
    );
  });

  it('refuses every IPv6 loopback, unique local and link-local address', () => {
    const hextet = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
    const ula = fc.tuple(fc.integer({ min: 0xfc00, max: 0xfdff }), fc.array(hextet, { minLength: 7, maxLength: 7 })).map(([first, rest]) => [first.toString(16), ...rest].join(':'));
    const linkLocal = fc.array(hextet, { minLength: 4, maxLength: 4 }).map((rest) => `fe80::${rest.join(':')}`);
    fc.assert(
      fc.property(fc.oneof(ula, linkLocal, fc.constant('::1')), (address) => {
        expect(checkAddress(address, none).allowed).toBe(false);
      }),
    );
  });
});

describe('checkUrl', () => {
  it('refuses other schemes and literal private addresses in any spelling', () => {
    for (const url of ['file:///etc/passwd', 'ftp://example.org/', 'data:text/plain,hi', 'javascript:alert(1)', 'gopher://x/']) {
      expect(() => checkUrl(url, none), url).toThrow(/URLs are not fetched/);
    }
    for (const url of ['http://127.0.0.1/', 'http://0x7f.1/', 'http://2130706433/', 'http://[::1]:8080/', 'http://[::ffff:10.0.0.1]/', 'http://0.0.0.0/', 'http://169.254.169.254/latest/meta-data/']) {
      expect(() => checkUrl(url, none), url).toThrow(/refused to fetch/);
    }
    expect(() => checkUrl('not a url', none)).toThrow(/is not a URL/);
    expect(checkUrl('https://example.org/a?b=c', none).href).toBe('https://example.org/a?b=c');
  });
});

describe('guardedLookup', () => {
  type Answer = { address: string; family: number }[];
  const fakeDns = (answer: Answer) => ((_host: string, _options: unknown, callback: (error: Error | null, addresses: Answer) => void) => callback(null, answer)) as never;
  const ask = (answer: Answer, guard = none, all = true) =>
    new Promise<unknown>((resolve) => guardedLookup(guard, fakeDns(answer))('host.example', { all }, ((error: Error | null, address: unknown) => resolve(error ?? address)) as never));

  it('refuses a name with any private address, even beside a public one', async () => {
    expect(
      await ask([
        { address: '93.184.216.34', family: 4 },
        { address: '10.0.0.1', family: 4 },
      ]),
    ).toBeInstanceOf(Error);
    expect(String(await ask([{ address: '::1', family: 6 }]))).toMatch(/host\.example: ::1 is a loopback address/);
  });

  it('hands over the addresses it checked, in both callback forms', async () => {
    const answer = [{ address: '93.184.216.34', family: 4 }];
    expect(await ask(answer)).toEqual(answer);
    expect(await ask(answer, none, false)).toBe('93.184.216.34');
  });
});

describe('a guarded connection', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = createServer((_req, res) => res.end('inside'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it('reaches localhost only when allow_private names its address, and never sends a request otherwise', async () => {
    const fetchInside = (allow: string[]) =>
      new Promise<string>((resolve, reject) => {
        const request = get(`http://localhost:${port}/`, { lookup: guardedLookup(createAddressGuard(allow)), agent: false }, (response) => {
          let text = '';
          response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
          response.on('end', () => resolve(text));
        });
        request.on('error', reject);
      });
    await expect(fetchInside([])).rejects.toThrow(/loopback/);
    expect(await fetchInside(['127.0.0.1', '::1'])).toBe('inside');
  });
});
