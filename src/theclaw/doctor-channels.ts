import { formatError, isClawError } from '../core/errors.js';
import { createChannel, type ChannelConfig, type ChannelStatus } from '../xgw/index.js';
import type { Check } from './doctor-check.js';

/**
 * `theclaw doctor`'s look at every configured channel. While xgw runs it knows each channel's
 * state: one that is not running fails with the channel's own reason and fix. While xgw is down,
 * a channel that can be asked without starting (Telegram: getMe with its token, against its
 * api_root) is asked, unless offline; a missing token is the config check's finding, not repeated.
 */
export async function checkChannels(configured: readonly ChannelConfig[], running: readonly ChannelStatus[] | null, env: NodeJS.ProcessEnv, offline: boolean): Promise<Check[]> {
  if (running)
    return configured.map((channel) =>
      runningCheck(
        channel,
        running.find((status) => status.id === channel.id),
      ),
    );
  if (offline) return [];
  const checks = await Promise.all(configured.map((channel) => askPlatform(channel, env)));
  return checks.flatMap((check) => (check ? [check] : []));
}

function runningCheck(channel: ChannelConfig, status: ChannelStatus | undefined): Check {
  const { id } = channel;
  if (!status) return { name: 'channels', status: 'warn', detail: `${id} is configured but xgw has not started it`, fix: 'theclaw reload' };
  switch (status.state) {
    case 'running':
      return { name: 'channels', status: 'ok', detail: `${id} is running${status.detail ? ` (${status.detail})` : ''}` };
    case 'starting':
      return { name: 'channels', status: 'warn', detail: `${id} is starting`, fix: 'wait a moment, then theclaw doctor again' };
    case 'error':
      // Without a problem, xgw retries it by itself (a polling conflict while a restart's old poll
      // ends, a network error): a warning now, not a channel that cannot run.
      if (!status.problem)
        return {
          name: 'channels',
          status: 'warn',
          detail: `${id} is not running, and xgw is retrying it: ${status.detail ?? 'its start failed'}`,
          fix: 'wait a moment, then theclaw doctor again; if it stays, see theclaw logs xgw',
        };
      return {
        name: 'channels',
        status: 'fail',
        detail: `${id} is not running: ${status.problem?.message ?? status.detail ?? 'its start failed'}`,
        fix: status.problem?.fix ?? 'see theclaw logs xgw',
      };
    case 'standby':
      return { name: 'channels', status: 'ok', detail: `${id} is on standby (${status.detail}): another host's gateway serves it` };
    case 'stopped':
      return { name: 'channels', status: 'fail', detail: `${id} is stopped${status.detail ? ` (${status.detail})` : ''}`, fix: 'see theclaw logs xgw, then theclaw reload' };
    default:
      return status.state satisfies never;
  }
}

async function askPlatform(channel: ChannelConfig, env: NodeJS.ProcessEnv): Promise<Check | null> {
  let adapter: Awaited<ReturnType<typeof createChannel>>;
  try {
    adapter = await createChannel(channel, env);
  } catch (error) {
    if (isClawError(error, 'invalid')) return null; // its token is not set: the config check says so
    throw error;
  }
  if (!adapter.check) return null;
  try {
    return { name: 'channels', status: 'ok', detail: `${channel.id} could start: ${await adapter.check()}` };
  } catch (error) {
    const [what, fix] = splitError(error);
    return { name: 'channels', status: 'fail', detail: `${channel.id} could not start: ${what}`, ...(fix && { fix }) };
  }
}

/** The error's line as `what` and `how to fix it`. */
function splitError(error: unknown): [string, string | undefined] {
  if (isClawError(error)) return [error.message, error.suggestion];
  return [formatError(error).replace(/^Error: /, ''), undefined];
}
