import { randomBytes } from 'node:crypto';
import { chmodSync, linkSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ClawError, errnoCode } from '../../core/errors.js';
import { splitChannelId } from '../types.js';
import { ensureDir } from '../../core/home.js';
import { webchatPeerKeyFile, webchatTokenFile } from '../../core/layout.js';

/**
 * A web chat's secrets, each 32 random bytes in hex in a file of its own (mode 0600), created on
 * the channel's first start: its access token, `$THECLAW_HOME/xgw/webchat-<instance>.token`, read
 * by `xgw status` (also while the daemon is down) to show the page's URL; and the key it signs
 * the peer ids it issues with, `xgw/webchat-<instance>.peer-key` (webchat-peers.ts).
 */
const TOKEN = /^[0-9a-f]{64}$/;

/** Where a web chat keeps its access token. */
export function webchatTokenPath(home: string, channelId: string): string {
  return webchatTokenFile(home, splitChannelId(channelId).instance);
}

/** The channel's token if its file holds one; never creates it. */
export function readWebchatToken(home: string, channelId: string): string | undefined {
  return readToken(webchatTokenPath(home, channelId)).token;
}

/** The channel's token: read from its file, or created (mode 0600) on first start. */
export function loadWebchatToken(home: string, channelId: string): string {
  return loadSecret(webchatTokenPath(home, channelId));
}

/** The key the channel signs its peer ids with: read from its file, or created (mode 0600) on first start. */
export function loadWebchatPeerKey(home: string, channelId: string): string {
  return loadSecret(webchatPeerKeyFile(home, splitChannelId(channelId).instance));
}

function loadSecret(path: string): string {
  ensureDir(dirname(path));
  const found = readToken(path);
  if (found.token !== undefined) return found.token;
  // Written aside and published with link() (fails if the file appeared meanwhile) or rename()
  // (replaces a damaged one), so no reader ever sees a half-written token.
  const token = randomBytes(32).toString('hex');
  const temp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(temp, token + '\n', { mode: 0o600 });
    if (found.missing) linkSync(temp, path);
    else renameSync(temp, path); // damaged: old links (or peer ids) stop working; the new URL is in `xgw status`
    return token;
  } catch (error) {
    const theirs = errnoCode(error) === 'EEXIST' ? readToken(path).token : undefined;
    if (theirs !== undefined) return theirs;
    throw new ClawError('io', `cannot create ${path}`, { suggestion: 'check that THECLAW_HOME is writable', cause: error });
  } finally {
    rmSync(temp, { force: true });
  }
}

/** The token in the file; `missing` when there is no file (otherwise the file is damaged). */
function readToken(path: string): { token?: string; missing?: true } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return { missing: true };
    throw new ClawError('io', `cannot read ${path}`, { suggestion: 'check its owner and permissions', cause: error });
  }
  if (!TOKEN.test(text)) return {};
  if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
  return { token: text };
}

/** The host as it goes into a URL (IPv6 in brackets). */
export function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** The page's address with its token, as `xgw status` shows it. */
export function webchatUrl(host: string, port: number, token: string): string {
  return `http://${urlHost(host)}:${port}/?token=${token}`;
}
