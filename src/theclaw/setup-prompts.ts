import * as prompts from '@clack/prompts';
import { ClawError } from '../core/errors.js';
import { loadPaiConfig } from '../pai/index.js';
import { listModels, providerSettings, setupModel, type ModelSetupResult } from './setup.js';
import { setupSummary } from './setup-summary.js';
import type { ChatAppSetupResult } from './setup-chat-app.js';
import { setupTelegram } from './setup-telegram.js';
import { SETUP_PROVIDERS, type SetupFlags, type SetupProvider } from './setup-types.js';

/**
 * `theclaw setup` on a terminal: the questions whose answers the flags give otherwise, answered
 * by the same functions (setup.ts, setup-telegram.ts, setup-discord.ts). Keys and tokens are
 * typed hidden; a key already stored is kept on an empty answer, so a second run changes only
 * what is asked for.
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
    await prompts.multiselect({
      message: 'What do you want to set up? (Space picks, Enter goes on)',
      options: [
        { value: 'model', label: 'The model', hint: 'provider, key, model' },
        { value: 'telegram', label: 'Telegram', hint: 'a bot you talk to admin through' },
        { value: 'discord', label: 'Discord', hint: 'a bot you talk to admin through' },
      ],
      initialValues: ['model'],
      required: true,
    }),
  );
  const model = what.includes('model') ? await askModel(home) : undefined;
  const telegram = what.includes('telegram') ? await askTelegram(home, flags) : undefined;
  const discord = what.includes('discord') ? await askDiscord(home, flags) : undefined;
  const summary = setupSummary(home, { model, telegram, discord });
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

async function askTelegram(home: string, flags: SetupFlags): Promise<ChatAppSetupResult> {
  prompts.log.info('In Telegram, ask @BotFather for /newbot; it answers with the bot token.');
  const token = answer(
    await prompts.password({ message: 'Paste the bot token', mask: '•', validate: (value) => (/^\d+:\S+$/.test(value?.trim() ?? '') ? undefined : 'a token looks like 123456789:AA...') }),
  ).trim();
  return checkingToken('Telegram', (spinner) =>
    setupTelegram(home, token, {
      apiRoot: flags.telegramApiRoot,
      waitSeconds: flags.telegramWaitSeconds,
      onWaiting: (bot) => spinner.message(`Now send /start to @${bot} in Telegram: the first person to message it becomes its owner`),
    }),
  );
}

async function askDiscord(home: string, flags: SetupFlags): Promise<ChatAppSetupResult> {
  prompts.log.info('In the Discord developer portal (discord.com/developers/applications), create an application; under Bot, copy its token (Reset Token) and enable Message Content Intent.');
  const token = answer(await prompts.password({ message: 'Paste the bot token', mask: '•', validate: (value) => (value?.trim() ? undefined : 'the token from Bot > Reset Token') })).trim();
  // Loaded here: discord.js is large, and most set-ups do not connect Discord.
  const { setupDiscord } = await import('./setup-discord.js');
  return checkingToken('Discord', (spinner) =>
    setupDiscord(home, token, {
      apiRoot: flags.discordApiRoot,
      waitSeconds: flags.discordWaitSeconds,
      onWaiting: (bot, inviteUrl) => {
        // The URL is too long for the spinner's line: said once above it.
        spinner.stop(`The token of @${bot} is good`);
        prompts.log.info(`To write to @${bot} you must share a server with it; invite it to yours: ${inviteUrl}`);
        spinner.start(`Now send @${bot} a direct message in Discord: the first person to write to it becomes its owner`);
      },
    }),
  );
}

/** A chat app's step under a spinner, which ends saying who owns the bot now. */
async function checkingToken(app: string, connect: (spinner: ReturnType<typeof prompts.spinner>) => Promise<ChatAppSetupResult>): Promise<ChatAppSetupResult> {
  const spinner = prompts.spinner();
  spinner.start('Checking the token');
  try {
    const result = await connect(spinner);
    spinner.stop(result.owner ? `You are the owner of @${result.bot}` : `@${result.bot}'s token replaced`);
    return result;
  } catch (error) {
    spinner.error(`${app} is not connected`);
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
