import * as prompts from '@clack/prompts';
import { ClawError } from '../core/errors.js';
import { loadPaiConfig } from '../pai/index.js';
import { listModels, providerSettings, setupModel, type ModelSetupResult } from './setup.js';
import { setupSummary } from './setup-summary.js';
import { setupTelegram, type TelegramSetupResult } from './setup-telegram.js';
import { SETUP_PROVIDERS, type SetupFlags, type SetupProvider } from './setup-types.js';

/**
 * `theclaw setup` on a terminal: the questions whose answers the flags give otherwise, answered
 * by the same functions (setup.ts, setup-telegram.ts). Keys and tokens are typed hidden; a key
 * already stored is kept on an empty answer, so a second run changes only what is asked for.
 */
const PROVIDER_LABELS: Record<SetupProvider, string> = {
  openai: 'OpenAI',
  anthropic: 'Anthropic',
  openrouter: 'OpenRouter',
  ollama: 'Ollama (on this machine)',
  'openai-compatible': 'Another OpenAI-compatible server (vLLM, LM Studio, a proxy)',
  mock: 'The offline mock (canned replies, no key)',
};

export async function setupInteractively(home: string, flags: SetupFlags, startUp: () => Promise<void>): Promise<void> {
  prompts.intro('TheClaw setup');
  const what = answer(
    await prompts.select({
      message: 'What do you want to set up?',
      options: [
        { value: 'model', label: 'The model', hint: 'provider, key, model' },
        { value: 'telegram', label: 'Telegram', hint: 'a bot you talk to admin through' },
        { value: 'both', label: 'Both' },
      ],
    }),
  );
  const model = what === 'telegram' ? undefined : await askModel(home);
  const telegram = what === 'model' ? undefined : await askTelegram(home, flags);
  const summary = setupSummary(home, model, telegram);
  prompts.note(summary.lines.slice(0, -1).join('\n'), 'Done');
  if (answer(await prompts.confirm({ message: `Run ${summary.next} now?` }))) {
    prompts.outro(`Running ${summary.next}`);
    return startUp();
  }
  prompts.outro(`Next: ${summary.next}`);
}

async function askModel(home: string): Promise<ModelSetupResult> {
  const current = loadPaiConfig(home).default?.split('/')[0];
  const provider = answer(
    await prompts.select({
      message: 'Which provider should the agents use?',
      options: SETUP_PROVIDERS.map((value) => ({ value, label: PROVIDER_LABELS[value] })),
      ...(current && (SETUP_PROVIDERS as readonly string[]).includes(current) ? { initialValue: current as SetupProvider } : {}),
    }),
  );
  const known = providerSettings(home, { provider, env: process.env });
  let baseUrl: string | undefined;
  if (provider === 'ollama' || provider === 'openai-compatible') {
    baseUrl = answer(
      await prompts.text({
        message: "The server's URL (up to /v1)",
        placeholder: 'http://127.0.0.1:8000/v1',
        initialValue: known.baseUrl ?? '',
        validate: (value) => (/^https?:\/\/\S+$/.test(value ?? '') ? undefined : 'a URL, e.g. http://127.0.0.1:8000/v1'),
      }),
    );
  }
  for (;;) {
    let apiKey: string | undefined;
    if (provider !== 'ollama' && provider !== 'mock') {
      const keep = known.key ? ` (Enter keeps the one ${known.keySource === 'environment' ? 'in the environment' : 'stored'})` : provider === 'openai-compatible' ? ' (Enter: none)' : '';
      const typed = answer(await prompts.password({ message: `Paste the API key${keep}`, mask: '•' }));
      apiKey = typed.trim() || undefined;
    }
    const modelId = provider === 'mock' ? 'echo' : await askModelId(provider, baseUrl ?? known.baseUrl, apiKey ?? known.key);
    const spinner = prompts.spinner();
    spinner.start('Checking with one tiny call');
    try {
      const result = await setupModel(home, { provider, baseUrl, model: modelId, apiKey, env: process.env });
      spinner.stop(`${result.provider}/${result.model} answered`);
      return result;
    } catch (error) {
      spinner.error('The check failed');
      prompts.log.error(error instanceof ClawError && error.suggestion ? `${error.message}\n${error.suggestion}` : (error as Error).message);
      if (!answer(await prompts.confirm({ message: 'Try again?' }))) throw new ClawError('aborted', 'setup stopped: nothing was changed', { suggestion: 'run theclaw setup again' });
    }
  }
}

/** The model, from the provider's list when it gives one, else typed. */
async function askModelId(provider: SetupProvider, baseUrl: string | undefined, key: string | undefined): Promise<string> {
  const ids = baseUrl ? await listModels(provider, baseUrl, key).catch(() => [] as string[]) : [];
  if (ids.length === 0) return answer(await prompts.text({ message: 'The model id', validate: (value) => (value?.trim() ? undefined : 'a model id') })).trim();
  return answer(await prompts.autocomplete({ message: 'Which model? (type to filter)', options: ids.map((id) => ({ value: id, label: id })), maxItems: 10 }));
}

async function askTelegram(home: string, flags: SetupFlags): Promise<TelegramSetupResult> {
  prompts.log.info('In Telegram, ask @BotFather for /newbot; it answers with the bot token.');
  const token = answer(
    await prompts.password({ message: 'Paste the bot token', mask: '•', validate: (value) => (/^\d+:\S+$/.test(value?.trim() ?? '') ? undefined : 'a token looks like 123456789:AA...') }),
  ).trim();
  const spinner = prompts.spinner();
  spinner.start('Checking the token');
  try {
    const result = await setupTelegram(home, token, {
      apiRoot: flags.telegramApiRoot,
      waitSeconds: flags.telegramWaitSeconds,
      onWaiting: (bot) => spinner.message(`Now send /start to @${bot} in Telegram: the first person to message it becomes its owner`),
    });
    spinner.stop(result.owner ? `You are the owner of @${result.bot}` : `@${result.bot}'s token replaced`);
    return result;
  } catch (error) {
    spinner.error('Telegram is not connected');
    throw error;
  }
}

/** The answer, or the end of the set-up when the person cancelled (Ctrl-C, Escape). */
function answer<T>(value: T): Exclude<T, symbol> {
  if (prompts.isCancel(value)) {
    prompts.cancel('Setup cancelled: what was done so far stays.');
    throw new ClawError('aborted', 'setup cancelled', { suggestion: 'run theclaw setup again' });
  }
  return value as Exclude<T, symbol>;
}
