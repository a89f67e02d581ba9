import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WebchatPeers } from './webchat-peers.js';

const KEY = 'k'.repeat(64);
const hex = (length: number) => fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: length, maxLength: length });

describe('web chat peer ids', () => {
  it('takes back exactly the credentials it issued, and no other string', () => {
    const peers = new WebchatPeers(KEY, 'webchat:guests');
    const { peer, credential } = peers.issue();
    expect(peers.verify(credential)).toBe(peer);
    expect(peers.issue().peer).not.toBe(peer);
    for (const claim of [undefined, '', peer, `${peer}.`, `${credential}0`, credential.toUpperCase(), ` ${credential}`]) expect(peers.verify(claim), String(claim)).toBeUndefined();
    // Another channel's key, or the same key for another channel, signs something else.
    expect(new WebchatPeers('x'.repeat(64), 'webchat:guests').verify(credential)).toBeUndefined();
    expect(new WebchatPeers(KEY, 'webchat:main').verify(credential)).toBeUndefined();
  });

  it('never takes a peer id with a signature made for another id (property)', () => {
    const peers = new WebchatPeers(KEY, 'webchat:guests');
    fc.assert(
      fc.property(hex(32), hex(32), hex(64), (mine, theirs, forged) => {
        fc.pre(mine !== theirs);
        const signature = peers.credential(mine).split('.')[1]!;
        expect(peers.verify(`${theirs}.${signature}`)).toBeUndefined();
        expect(peers.verify(`${theirs}.${forged}`)).toBeUndefined();
        expect(peers.verify(peers.credential(theirs))).toBe(theirs);
      }),
    );
  });
});
