import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClawError } from './errors.js';
import { isStorageError, storageError, withStoragePath } from './storage-error.js';

// The classification by code; src/e2e/disk.test.ts meets the real thing on a full and a read-only tmpfs.

const fail = (code: string, extra: object = {}) => Object.assign(new Error(`${code}: some text`), { code, ...extra });
const dir = mkdtempSync(join(tmpdir(), 'theclaw-storage-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('storageError', () => {
  it.each([
    ['ENOSPC', 'disk_full', 'the disk is full (writing /data/a.log)', 'free space on the disk that holds it and retry'],
    ['EDQUOT', 'disk_full', 'the disk is full (writing /data/a.log)', 'free space on the disk that holds it and retry'],
    ['EROFS', 'read_only', 'the data directory is read-only (writing /data/a.log)', 'remount it read-write (or point THECLAW_HOME at a writable directory) and retry'],
    ['EACCES', 'read_only', 'permission denied on /data/a.log', 'give the user running it write access to that path and retry'],
    ['EIO', 'io', 'a disk read or write failed (/data/a.log: EIO)', 'check the disk (free space, the kernel log) and retry'],
  ])('turns a Node %s into a %s ClawError naming the path of the error', (code, kind, message, suggestion) => {
    const cause = fail(code, { path: '/data/a.log', syscall: 'write' });
    const error = storageError(cause);
    expect(error).toBeInstanceOf(ClawError);
    expect(error).toMatchObject({ kind, message, suggestion, cause });
  });

  it('reads SQLite codes, with the path it is given, or none', () => {
    expect(storageError(fail('SQLITE_FULL'), '/data/events.db')).toMatchObject({ kind: 'disk_full', message: 'the disk is full (writing /data/events.db)' });
    expect(storageError(fail('SQLITE_FULL'))).toMatchObject({ kind: 'disk_full', message: 'the disk is full', suggestion: 'free space on the disk that holds $THECLAW_HOME and retry' });
    expect(storageError(fail('SQLITE_READONLY_DBMOVED'))).toMatchObject({ kind: 'read_only' });
    expect(storageError(fail('SQLITE_IOERR_WRITE'))).toMatchObject({ kind: 'io', message: 'a disk read or write failed (SQLITE_IOERR_WRITE)' });
  });

  it('asks the file system about the codes that do not say why, and leaves them alone on a healthy one', () => {
    const file = join(dir, 'events.db');
    expect(storageError(fail('SQLITE_IOERR_SHMSIZE'), file)).toMatchObject({ kind: 'io', message: `a disk read or write failed (${file}: SQLITE_IOERR_SHMSIZE)` });
    expect(storageError(fail('SQLITE_CANTOPEN'), file)).toBeUndefined();
    expect(storageError(fail('ENOENT', { syscall: 'mkdir', path: join(dir, 'a', 'b') }))).toBeUndefined();
    // An existing directory that takes no new ones, and a path through a file: no storage can be had there.
    expect(storageError(fail('ENOENT', { syscall: 'mkdir', path: '/proc/x' }))).toMatchObject({
      kind: 'io',
      message: '/proc/x cannot be made: its directory takes no new entries (a system file system such as /proc?)',
    });
    expect(storageError(fail('ENOTDIR', { syscall: 'mkdir', path: '/etc/passwd/x' }))).toMatchObject({ kind: 'io', message: '/etc/passwd/x cannot be made: a part of it is a file, not a directory' });
  });

  it('is undefined for what is no storage failure, and keeps a storage ClawError (or one caused by it) as it is', () => {
    expect(storageError(fail('ENOENT', { syscall: 'open', path: '/x' }))).toBeUndefined();
    expect(storageError(fail('EACCES', { syscall: 'spawn /usr/local/bin/handler', path: '/usr/local/bin/handler' }))).toBeUndefined();
    expect(storageError(fail('EPERM', { syscall: 'kill' }))).toBeUndefined();
    expect(storageError(fail('SQLITE_CONSTRAINT_UNIQUE'))).toBeUndefined();
    expect(storageError(new Error('plain'))).toBeUndefined();
    expect(storageError(new ClawError('conflict', 'locked'))).toBeUndefined();
    const full = new ClawError('disk_full', 'the disk is full (writing /a)');
    expect(storageError(full, '/b')).toBe(full);
    const wrapped = new ClawError('io', 'a reply could not be delivered', { cause: fail('ENOSPC') });
    expect(storageError(wrapped)).toBe(wrapped);
    expect(isStorageError(wrapped)).toBe(true);
    expect(isStorageError(new ClawError('io', 'xgw is not running'))).toBe(false);
  });

  it('withStoragePath names the path for a storage failure and passes anything else through', () => {
    expect(() =>
      withStoragePath('/data/events.db', () => {
        throw fail('SQLITE_FULL');
      }),
    ).toThrow('the disk is full (writing /data/events.db)');
    const inner = () =>
      withStoragePath('/inner', () => {
        throw fail('SQLITE_FULL');
      });
    expect(() => withStoragePath('/outer', inner)).toThrow('the disk is full (writing /inner)');
    const other = new ClawError('not_found', 'no such thread');
    expect(() =>
      withStoragePath('/data/events.db', () => {
        throw other;
      }),
    ).toThrow(other);
    expect(withStoragePath('/data/events.db', () => 42)).toBe(42);
  });
});
