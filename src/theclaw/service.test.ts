import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { splitCommand } from '../core/command.js';
import { cliPath } from '../core/package.js';
import { commandRuns, createTestHome, expectClawError, runTool, waitFor, type TestHome } from '../testing/index.js';
import { installService, launchdPlists, systemdUnits } from './service.js';

const hasSystemdAnalyze = commandRuns('systemd-analyze', ['--version']);

let t: TestHome | undefined;
afterEach(() => t?.cleanup());

describe('theclaw service install', () => {
  it('writes a systemd user unit per daemon that runs it in the foreground, starts it again after a crash and at boot, and an env file for keys; again it changes nothing; uninstall removes the units', async () => {
    t = createTestHome();
    const config = join(t.home, 'xdg');
    const env = { ...t.env, XDG_CONFIG_HOME: config };
    const result = await runTool('theclaw', ['service', 'install', '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    const installed = JSON.parse(result.stdout) as { written: string[]; env_file: string; next: string[] };
    const units = ['notifier', 'xgw'].map((daemon) => join(config, 'systemd', 'user', `theclaw-${daemon}.service`));
    expect(installed.written).toEqual([...units, join(t.home, 'secrets.env')]);
    expect(statSync(installed.env_file).mode & 0o777).toBe(0o600);
    expect(installed.next).toContain('systemctl --user enable --now theclaw-notifier.service theclaw-xgw.service');
    for (const [index, daemon] of ['notifier', 'xgw'].entries()) {
      const text = readFileSync(units[index]!, 'utf8');
      expect(text).toContain(`Environment="THECLAW_HOME=${t.home}"`);
      expect(text).toContain(`EnvironmentFile=-${t.home}/secrets.env`);
      expect(splitCommand(/^ExecStart=(.*)$/m.exec(text)![1]!)).toEqual([process.execPath, cliPath(daemon), 'start', '--foreground']);
      expect(text).toMatch(/^Restart=on-failure$/m);
      expect(text).toMatch(/^WantedBy=default\.target$/m);
    }
    expect(JSON.parse((await runTool('theclaw', ['service', 'install', '--json'], env)).stdout).written).toEqual([]);

    const removed = await runTool('theclaw', ['service', 'uninstall'], env);
    expect(removed.stdout).toContain('systemctl --user disable --now theclaw-notifier.service theclaw-xgw.service');
    expect(units.some((unit) => existsSync(unit))).toBe(false);
    expect(existsSync(installed.env_file)).toBe(true); // the owner's keys stay
  });

  it.skipIf(!hasSystemdAnalyze)('writes units systemd itself accepts (systemd-analyze verify)', () => {
    t = createTestHome();
    const { units } = systemdUnits(t.home, { ...t.env, XDG_CONFIG_HOME: join(t.home, 'xdg') });
    installService(t.home, { ...t.env, XDG_CONFIG_HOME: join(t.home, 'xdg') });
    for (const unit of units) execFileSync('systemd-analyze', ['verify', unit.path], { stdio: 'pipe' }); // throws on a unit it refuses
  });

  it("runs the unit's command as a working daemon, and one killed like a crash can be started again by it", async () => {
    t = createTestHome();
    const home = t.home;
    const [command, ...args] = splitCommand(/^ExecStart=(.*)$/m.exec(systemdUnits(home, t.env).units[0]!.text)![1]!);
    const start = () => spawn(command, args, { env: { ...t!.env, THECLAW_HOME: home }, stdio: 'ignore' });
    const answering = async () => (await runTool('notifier', ['status', '--json'], t!.env)).code === 0 && JSON.parse((await runTool('notifier', ['status', '--json'], t!.env)).stdout).running === true;
    const first = start();
    await waitFor(answering, 'the daemon the unit starts', 15_000);
    first.kill('SIGKILL'); // what Restart=on-failure is for
    await new Promise((resolve) => first.once('exit', resolve));
    const second = start();
    try {
      await waitFor(async () => (await answering()) && (await runTool('notifier', ['status', '--json'], t!.env)).stdout.includes(`"pid":${second.pid}`), 'the daemon started again', 15_000);
    } finally {
      second.kill('SIGTERM');
      await new Promise((resolve) => second.once('exit', resolve));
    }
  });

  it('prints launchd agents on macOS instead, keeping alive a daemon that did not exit cleanly', () => {
    t = createTestHome();
    const [notifier] = launchdPlists(t.home);
    expect(notifier!.name).toBe('dev.theclaw.notifier.plist');
    expect(notifier!.text).toContain(`<string>${cliPath('notifier')}</string>`);
    expect(notifier!.text).toContain('<key>SuccessfulExit</key><false/>');
    const result = installService(t.home, t.env, 'darwin');
    expect(result.written).toEqual([]);
    expect(result.next.at(-1)).toMatch(/^launchctl load /);
  });

  it('refuses a home that does not exist yet, and says to run theclaw up first', () => {
    expect(expectClawError(() => installService('/nonexistent/theclaw-home'), 'not_found').suggestion).toMatch(/theclaw up/);
  });
});
