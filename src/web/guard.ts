import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOptions } from 'node:dns';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { ClawError } from '../core/errors.js';

/**
 * The SSRF guard: whether a URL the model (or a page, or a redirect) names may be fetched. Only
 * public unicast addresses pass; loopback, private, link-local (the cloud metadata address),
 * CGNAT, unspecified, multicast, reserved, IPv6 ULA and the IPv4 addresses inside IPv6 ones
 * (mapped, NAT64, 6to4, Teredo) are refused, unless the owner's `allow_private` names them. The
 * metadata addresses are refused even then: no one means to hand a model the machine's cloud
 * credentials.
 *
 * The decision is made on addresses, never on names: `checkUrl` refuses other schemes and
 * literal addresses before anything is sent, and `guardedLookup` checks every address a name
 * resolves to at the moment of connecting, and connects to the one it checked — so a name that
 * resolves to a public address for the check and a private one for the connection (DNS
 * rebinding) has no gap to use. A name with any refused address is refused whole. The browser's
 * navigations and requests are meant to go through the same `checkAddress`.
 */

export type Verdict = { allowed: true } | { allowed: false; reason: string };

/** The owner's exceptions, parsed once: addresses and CIDRs, and host names. */
export interface AddressGuard {
  readonly ranges: readonly [ipaddr.IPv4 | ipaddr.IPv6, number][];
  readonly hosts: ReadonlySet<string>;
}

/** Never allowed, whatever `allow_private` says: the cloud metadata services (AWS, GCP, Azure; AWS's IPv6 one). */
const METADATA = ['169.254.169.254', 'fd00:ec2::254'].map((address) => ipaddr.parse(address).toNormalizedString());

/** Human names of ipaddr.js's ranges, for the refusal. */
const RANGE_NAMES: Record<string, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  linkLocal: 'a link-local address',
  carrierGradeNat: 'a carrier-grade NAT address',
  uniqueLocal: 'a unique local IPv6 address',
  unspecified: 'the unspecified address',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
};

/** The guard of `allow_private` (IPs, CIDRs and host names, as in web/config.yaml). */
export function createAddressGuard(allowPrivate: readonly string[] = []): AddressGuard {
  const ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][] = [];
  const hosts = new Set<string>();
  for (const entry of allowPrivate) {
    const text = entry.trim().replace(/^\[(.*)\]$/, '$1');
    if (ipaddr.isValidCIDR(text)) ranges.push(normalizeRange(ipaddr.parseCIDR(text)));
    else if (ipaddr.isValid(text)) {
      const address = ipaddr.process(text);
      ranges.push([address, address.kind() === 'ipv4' ? 32 : 128]);
    } else hosts.add(hostKey(text));
  }
  return { ranges, hosts };
}

function normalizeRange([address, bits]: [ipaddr.IPv4 | ipaddr.IPv6, number]): [ipaddr.IPv4 | ipaddr.IPv6, number] {
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96];
  return [address, bits];
}

/**
 * Whether `address` (an IP as text) may be connected to; `host` is the name it was resolved
 * from, for the host names of `allow_private`.
 */
export function checkAddress(address: string, guard: AddressGuard, host?: string): Verdict {
  if (!ipaddr.isValid(address)) return { allowed: false, reason: `${JSON.stringify(address)} is not an IP address` };
  // An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is the IPv4 address it maps.
  const ip = ipaddr.process(address);
  if (METADATA.includes(ip.toNormalizedString())) return { allowed: false, reason: `${address} is the cloud metadata address, never fetched` };
  const range = ip.range();
  if (range === 'unicast') return { allowed: true };
  if (host !== undefined && guard.hosts.has(hostKey(host))) return { allowed: true };
  if (guard.ranges.some(([base, bits]) => base.kind() === ip.kind() && ip.match(base, bits))) return { allowed: true };
  return { allowed: false, reason: `${address} is ${RANGE_NAMES[range] ?? `a reserved address (${range})`}` };
}

/**
 * The URL to fetch, or a `usage` refusal: only http(s), and a literal address only if the guard
 * allows it (a name is checked when it is resolved, by `guardedLookup`).
 */
export function checkUrl(text: string, guard: AddressGuard): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ClawError('usage', `${JSON.stringify(text)} is not a URL`, { suggestion: 'give a full URL such as https://example.org/page' });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ClawError('usage', `${url.protocol} URLs are not fetched`, { suggestion: 'give an http:// or https:// URL' });
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (ipaddr.isValid(host)) refuseUnless(checkAddress(host, guard), url);
  return url;
}

function refuseUnless(verdict: Verdict, url: URL | string): void {
  if (!verdict.allowed) {
    const host = typeof url === 'string' ? url : url.host;
    throw new ClawError('usage', `refused to fetch from ${host}: ${verdict.reason}`, {
      suggestion: 'only public addresses are fetched; the owner can allow a private host or network in $THECLAW_HOME/web/config.yaml (allow_private)',
    });
  }
}

/**
 * A `lookup` for `net.connect` (so for http.request, or an undici Agent's `connect`) that resolves every
 * address of the name, refuses the name if any of them is refused, and hands over only checked
 * addresses: the connection goes to what was checked.
 */
export function guardedLookup(guard: AddressGuard, resolve: typeof dnsLookup = dnsLookup): LookupFunction {
  return (hostname: string, options: LookupOptions, callback: (...args: never[]) => void) => {
    const done = callback as unknown as (error: Error | null, address?: string | LookupAddress[], family?: number) => void;
    resolve(hostname, { ...options, all: true } as LookupAllOptions, (error, addresses) => {
      if (error) return done(error);
      try {
        if (addresses.length === 0) throw new ClawError('upstream', `${hostname} has no address`);
        for (const { address } of addresses) refuseUnless(checkAddress(address, guard, hostname), hostname);
      } catch (refusal) {
        return done(refusal as Error);
      }
      if (options.all) done(null, addresses);
      else done(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/** Host names compare without case and without a final dot. */
function hostKey(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}
