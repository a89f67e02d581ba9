import { chmodSync, lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { errnoCode } from './errors.js';

/**
 * Everything under THECLAW_HOME is private: conversations, tokens, keys in configs. Each tool
 * creates with umask 077 (see runCli), so what it makes is 0700/0600; `theclaw up` repairs what
 * was made otherwise (a home made by `mkdir -p`, files copied in).
 */
export const PRIVATE_UMASK = 0o077;

/**
 * Takes the group's and others' permissions off `home` and everything under it (symlinks are
 * neither followed nor changed); the owner's stay as they are. Returns the paths it changed,
 * relative to `home` (`.` for the home itself).
 */
export function repairPermissions(home: string): string[] {
  const repaired: string[] = [];
  const visit = (path: string, relative: string): void => {
    let stat;
    try {
      stat = lstatSync(path);
    } catch (error) {
      if (errnoCode(error) === 'ENOENT') return; // removed meanwhile
      throw error;
    }
    if (stat.isSymbolicLink()) return;
    if ((stat.mode & 0o077) !== 0) {
      chmodSync(path, stat.mode & 0o7700);
      repaired.push(relative);
    }
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name), relative === '.' ? name : join(relative, name));
  };
  visit(home, '.');
  return repaired;
}
