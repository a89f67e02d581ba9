import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { joinCommand } from '../core/command.js';
import { ClawError } from '../core/errors.js';
import { ensureDir } from '../core/home.js';
import { logsDir, secretsEnvPath } from '../core/layout.js';
import { SECRETS_HEADER } from '../core/secrets-file.js';
import { cliPath } from '../core/package.js';

/**
 * Autostart: the two daemons as services of the user's service manager, each in the foreground
 * (`notifier start --foreground`, `xgw start --foreground`) so that the manager sees it die and
 * starts it again, and starts both at boot. systemd user units on Linux; on macOS the launchd
 * plists are printed, for the owner to load. The agents need nothing of their own: notifier runs
 * them. The environment of a service is not the shell's, so provider keys and bot tokens go in
 * secrets.env, which the units read (0600; `theclaw setup` writes the keys into it).
 */
export const DAEMONS = ['notifier', 'xgw'] as const;
type Daemon = (typeof DAEMONS)[number];

export interface ServiceFiles {
  /** Where the unit files go (systemd: the user unit directory). */
  dir: string;
  units: { daemon: Daemon; name: string; path: string; text: string }[];
  /** The variables the units read: keys and tokens, `NAME=value` per line. */
  envFile: string;
}

/** `$XDG_CONFIG_HOME/systemd/user` (default `~/.config/systemd/user`). */
function systemdUserDir(env: NodeJS.ProcessEnv): string {
  return join(env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config'), 'systemd', 'user');
}

export function systemdUnits(home: string, env: NodeJS.ProcessEnv = process.env): ServiceFiles {
  const dir = systemdUserDir(env);
  const envFile = secretsEnvPath(home);
  const units = DAEMONS.map((daemon) => {
    const name = `theclaw-${daemon}.service`;
    const text = `# Written by theclaw service install; theclaw service uninstall removes it.
[Unit]
Description=TheClaw ${daemon === 'notifier' ? 'notifier (runs the agents and timers)' : 'xgw (the gateway: web chat, Telegram, Discord, terminal)'}
After=network-online.target

[Service]
Type=simple
Environment=${systemdQuote(`THECLAW_HOME=${home}`)}
# The PATH of the shell that installed it: the agents' commands (agent, cmds, thread...) are found on it.
Environment=${systemdQuote(`PATH=${env.PATH ?? '/usr/local/bin:/usr/bin:/bin'}`)}
# Provider keys and bot tokens (OPENAI_API_KEY=..., TELEGRAM_BOT_TOKEN=...): secrets.env, 0600, which theclaw setup writes.
EnvironmentFile=-${envFile}
ExecStart=${joinCommand([process.execPath, cliPath(daemon), 'start', '--foreground'])}
# A crash is followed by a start; a stop (theclaw down, systemctl --user stop) is not.
Restart=on-failure
RestartSec=2

[Install]
WantedBy=default.target
`;
    return { daemon, name, path: join(dir, name), text };
  });
  return { dir, units, envFile };
}

/** The launchd agents for macOS (printed: `launchctl load` them from ~/Library/LaunchAgents). */
export function launchdPlists(home: string): { daemon: Daemon; name: string; text: string }[] {
  const xml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  return DAEMONS.map((daemon) => ({
    daemon,
    name: `dev.theclaw.${daemon}.plist`,
    text: `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key><string>dev.theclaw.${daemon}</string>
  <key>ProgramArguments</key>
  <array>
    <string>${xml(process.execPath)}</string>
    <string>${xml(cliPath(daemon))}</string>
    <string>start</string>
    <string>--foreground</string>
  </array>
  <key>EnvironmentVariables</key>
  <dict><key>THECLAW_HOME</key><string>${xml(home)}</string></dict>
  <key>RunAtLoad</key><true/>
  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>
  <key>StandardErrorPath</key><string>${xml(join(logsDir(home), `${daemon}.launchd.log`))}</string>
</dict>
</plist>
`,
  }));
}

export interface InstallResult {
  platform: 'systemd' | 'launchd';
  written: string[];
  env_file: string;
  next: string[];
}

/**
 * Writes the systemd user units (again, if they changed: an install moved elsewhere) and an env
 * file to fill in, and says the commands that enable them. Nothing is started here: the owner's
 * `systemctl --user enable --now` does that, after `theclaw down` if the daemons run already.
 */
export function installService(home: string, env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): InstallResult {
  if (!existsSync(home)) throw new ClawError('not_found', `there is no TheClaw home at ${home}`, { suggestion: 'run theclaw up once first: it creates the home and the agents' });
  if (platform === 'darwin') {
    return {
      platform: 'launchd',
      written: [],
      env_file: '',
      next: [
        ...launchdPlists(home).flatMap(({ name, text }) => [`# ~/Library/LaunchAgents/${name}`, ...text.trimEnd().split('\n')]),
        'launchctl load ~/Library/LaunchAgents/dev.theclaw.notifier.plist ~/Library/LaunchAgents/dev.theclaw.xgw.plist',
      ],
    };
  }
  const files = systemdUnits(home, env);
  ensureDir(files.dir);
  const written: string[] = [];
  for (const unit of files.units) {
    if (existsSync(unit.path) && readFileSync(unit.path, 'utf8') === unit.text) continue;
    writeFileSync(unit.path, unit.text, { mode: 0o644 });
    written.push(unit.path);
  }
  if (!existsSync(files.envFile)) {
    writeFileSync(files.envFile, `${SECRETS_HEADER}\n`, { mode: 0o600 });
    written.push(files.envFile);
  }
  const names = files.units.map((unit) => unit.name).join(' ');
  return {
    platform: 'systemd',
    written,
    env_file: files.envFile,
    next: [
      `put your keys and tokens in ${files.envFile} (theclaw setup does, or by hand: OPENAI_API_KEY=..., TELEGRAM_BOT_TOKEN=...)`,
      'theclaw down   # the services start the daemons from now on',
      'systemctl --user daemon-reload',
      `systemctl --user enable --now ${names}`,
      'loginctl enable-linger "$USER"   # to start them at boot, before you log in',
    ],
  };
}

/** Removes the units (after `systemctl --user disable --now`, which it says); the env file stays. */
export function uninstallService(home: string, env: NodeJS.ProcessEnv = process.env): { removed: string[]; next: string[] } {
  const files = systemdUnits(home, env);
  const removed = files.units.filter((unit) => existsSync(unit.path)).map((unit) => unit.path);
  for (const path of removed) rmSync(path, { force: true });
  return {
    removed,
    next: removed.length ? [`systemctl --user disable --now ${files.units.map((unit) => unit.name).join(' ')}`, 'systemctl --user daemon-reload'] : [],
  };
}

/** A value for `Environment=`: quoted, with what systemd would expand escaped. */
function systemdQuote(value: string): string {
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%').replace(/\$/g, '$$$$')}"`;
}
