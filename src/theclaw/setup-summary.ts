import { daemonHolder } from '../core/daemon.js';
import type { ModelSetupResult } from './setup.js';
import type { TelegramSetupResult } from './setup-telegram.js';

/** What `theclaw setup` did, said the same after the flags and the prompts, and what to run next. */
export function setupSummary(home: string, model: ModelSetupResult | undefined, telegram: TelegramSetupResult | undefined): { lines: string[]; next: string } {
  const running = Boolean(daemonHolder(home, 'notifier') || daemonHolder(home, 'xgw'));
  const next = running ? 'theclaw down && theclaw up' : 'theclaw up';
  const keyLine = { stored: `key stored in ${model?.secrets_file}`, kept: `key kept in ${model?.secrets_file}`, environment: 'key from the environment (not stored)', none: 'no key' };
  return {
    next,
    lines: [
      ...(model
        ? [
            `model     ${model.provider}/${model.model}${model.checked_ms === null ? ' (offline mock: nothing to check)' : ` answered in ${model.checked_ms} ms`}; ${keyLine[model.key]}; default in ${model.config_file}`,
          ]
        : []),
      ...(telegram
        ? [
            `telegram  @${telegram.bot}: token stored in ${telegram.secrets_file}`,
            ...(telegram.owner
              ? [`          owner ${telegram.owner} (the one peer ${telegram.channel} admits, and in admin's policy.owners)`]
              : [`          ${telegram.channel} was configured already: only its token changed`]),
            ...(telegram.route ? [`          route ${telegram.route.channel} → ${telegram.route.agent}`] : []),
          ]
        : []),
      running ? `Next: ${next}   # the running daemons read keys and channels when they start` : `Next: ${next}   # then open the web chat URL it prints`,
    ],
  };
}
