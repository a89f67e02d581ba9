import { daemonHolder } from '../core/daemon.js';
import type { ModelSetupResult } from './setup.js';
import { chatAppLines, type ChatAppSetupResult } from './setup-chat-app.js';

/** What `theclaw setup` did, said the same after the flags and the prompts, and what to run next. */
export function setupSummary(home: string, done: { model?: ModelSetupResult; telegram?: ChatAppSetupResult; discord?: ChatAppSetupResult }): { lines: string[]; next: string } {
  const { model, telegram, discord } = done;
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
      ...(telegram ? chatAppLines('telegram', telegram) : []),
      ...(discord ? chatAppLines('discord', discord) : []),
      running ? `Next: ${next}   # the running daemons read keys and channels when they start` : `Next: ${next}   # then open the web chat URL it prints`,
    ],
  };
}
