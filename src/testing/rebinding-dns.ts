/**
 * A stand-in resolver for the browser's guard proxy: `site.test` is 127.0.0.1, and `rebind.test`
 * is 127.0.0.1 at its first lookup and 127.0.0.2 after (a DNS-rebinding name, on loopback only).
 * `lookups` counts each name's lookups; clear it to start a name over.
 */
export function rebindingDns(): { resolve: (host: string) => Promise<string[]>; lookups: Map<string, number> } {
  const lookups = new Map<string, number>();
  const resolve = async (host: string): Promise<string[]> => {
    const count = (lookups.get(host) ?? 0) + 1;
    lookups.set(host, count);
    if (host === 'site.test') return ['127.0.0.1'];
    if (host === 'rebind.test') return [count === 1 ? '127.0.0.1' : '127.0.0.2'];
    throw new Error(`${host}: ENOTFOUND`);
  };
  return { resolve, lookups };
}
