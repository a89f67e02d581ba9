import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { printLines } from '../core/cli.js';
import { startDaemonProcess, stopDaemonProcess } from '../core/daemon.js';
import { usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { daemonLogFile } from '../core/layout.js';
import { sendCommand } from './client.js';
import { serveBrowsers } from './service.js';
import type { BrowserCommand } from './types.js';

/** The CLI's commands: arguments in, one command to the agent's browser, its text out. */

type Flags = { newTab?: boolean; submit?: boolean; text?: string; ms?: number; full?: boolean; out?: string; foreground?: boolean };

export async function run(name: string, args: unknown[], globals: { agent?: string }): Promise<void> {
  const positional = args.slice(0, -2) as (string | number | undefined)[];
  const flags = args.at(-2) as Flags;
  const home = resolveHome();
  if (name === 'start') return start(home, flags.foreground ?? false);
  if (name === 'stop') return printLines([(await stopDaemonProcess(home, 'browser')) ? 'browser service stopped' : 'the browser service is not running']);
  const command = commandOf(name, positional, flags);
  const reply = await sendCommand(command, { home, agent: globals.agent, env: process.env });
  if (!reply.file) return void process.stdout.write(reply.text.endsWith('\n') ? reply.text : `${reply.text}\n`);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const path = resolve(flags.out ?? `${name}-${stamp}.${reply.file.extension}`);
  const bytes = Buffer.from(reply.file.base64, 'base64');
  writeFileSync(path, bytes, { mode: 0o600 });
  printLines([`${reply.text} Saved ${path} (${Math.ceil(bytes.length / 1024)} KB). To send it with your answer: agent attach ${path}`]);
}

function commandOf(name: string, [first, second]: (string | number | undefined)[], flags: Flags): BrowserCommand {
  switch (name) {
    case 'open':
      return { name, url: String(first), ...(flags.newTab ? { new_tab: true } : {}) };
    case 'click':
      return { name, ref: refOf(first) };
    case 'type':
      return { name, ref: refOf(first), text: String(second), ...(flags.submit ? { submit: true } : {}) };
    case 'select':
      return { name, ref: refOf(first), value: String(second) };
    case 'press':
      return { name, key: String(first) };
    case 'wait':
      if ((flags.text === undefined) === (flags.ms === undefined)) throw usageError('browser wait needs --text or --ms, not both', 'e.g. browser wait --text "Booking confirmed"');
      if (flags.ms !== undefined && flags.ms > 60_000) throw usageError('--ms is at most 60000', 'wait for a text instead: browser wait --text <t>');
      return flags.text !== undefined ? { name, text: flags.text } : { name, ms: flags.ms };
    case 'tabs':
      return first === undefined ? { name } : { name, select: Number(first) };
    case 'screenshot':
      return { name, ...(flags.full ? { full: true } : {}) };
    case 'snapshot':
    case 'back':
    case 'pdf':
    case 'close':
      return { name };
    default:
      throw usageError(`unknown browser command ${name}`, 'see browser --help');
  }
}

/** A ref as the snapshot writes it (`e12`); `[ref=e12]` and `ref=e12` are taken too. */
function refOf(value: unknown): string {
  const ref = /^\[?(?:ref=)?((?:f\d+)?e\d+)\]?$/.exec(String(value))?.[1];
  if (!ref) throw usageError(`${JSON.stringify(value)} is not a ref`, 'give a ref from the latest snapshot, such as e12 (browser snapshot lists them)');
  return ref;
}

async function start(home: string, foreground: boolean): Promise<void> {
  if (foreground) {
    await serveBrowsers(home);
    process.exit(0);
  }
  const { pid } = await startDaemonProcess(home, 'browser');
  printLines([`browser service started (pid ${pid}); log: ${daemonLogFile(home, 'browser')}`]);
}
