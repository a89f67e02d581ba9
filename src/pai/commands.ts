import { readFileSync } from 'node:fs';
import { printJson, printLines, readStdin } from '../core/cli.js';
import { setYamlConfigKey, yaml } from '../core/config.js';
import { ClawError, errnoCode, usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { chat } from './chat.js';
import { paiConfigPath } from '../core/layout.js';
import { keyVariables } from './key-ring.js';
import { BUILTIN_PROVIDERS, chooseModel, loadPaiConfig, MOCK_PROVIDER, resolveModel } from './models.js';
import { transcribe } from './transcribe.js';
import type { ChatEvent } from './types.js';

interface Json {
  json?: boolean;
}

export interface ChatFlags extends Json {
  session?: string;
  system?: string;
  systemFile?: string;
  provider?: string;
  model?: string;
  inputFile?: string;
  stream?: boolean;
  tools: boolean;
  maxTurns?: number;
  cwd?: string;
}

export async function chatCommand(message: string | undefined, options: ChatFlags): Promise<void> {
  const input =
    message ??
    (options.inputFile !== undefined
      ? readText(options.inputFile, '--input-file')
      : (await readStdin(usageError('no message', 'pass it as an argument, with --input-file, or on stdin'))).toString('utf8'));
  if (input.trim() === '') throw usageError('the message is empty', 'pass it as an argument, with --input-file, or on stdin');
  const system = options.systemFile !== undefined ? readText(options.systemFile, '--system-file') : options.system;
  const showTools = !options.json && process.stderr.isTTY;
  // What --stream printed since the last tool call: the final reply, unless the turn ended otherwise.
  let streamedTail = '';
  const onEvent = (event: ChatEvent) => {
    if (options.json) process.stderr.write(JSON.stringify(event) + '\n');
    if (event.type === 'delta' && options.stream) {
      process.stdout.write(event.text);
      streamedTail += event.text;
    }
    if (event.type === 'tool_call') streamedTail = '';
    if (event.type === 'tool_call' && showTools) process.stderr.write(`$ ${event.arguments.command}\n`);
  };
  // Ctrl-C reaches this process but not bash_exec's commands, which run in their own process
  // groups: abort the turn, so that they are killed with their groups, then exit 130.
  const controller = new AbortController();
  let interrupted: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    interrupted = signal;
    controller.abort();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let result: Awaited<ReturnType<typeof chat>>;
  try {
    result = await chat({
      input,
      system,
      sessionFile: options.session,
      provider: options.provider,
      model: options.model,
      tools: options.tools,
      maxTurns: options.maxTurns,
      cwd: options.cwd,
      onEvent,
      signal: controller.signal,
    });
  } catch (error) {
    if (interrupted === undefined) throw error;
    throw new ClawError('aborted', `interrupted by ${interrupted}`, {
      suggestion: options.session ? 'run it again to go on; the session holds the turn so far' : 'run it again',
      exitCode: interrupted === 'SIGINT' ? 130 : 143,
      cause: error,
    });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  // With --stream the reply is out already; a reply made without deltas (the tool-limit note) is not,
  // even when text the model wrote beside its last tool calls was streamed.
  if (streamedTail !== result.text) process.stdout.write((streamedTail ? '\n' : '') + result.text);
  process.stdout.write('\n');
}

export async function modelList(options: Json): Promise<void> {
  const config = loadPaiConfig(resolveHome());
  const rows: { provider: string; model: string | null; source: 'mock' | 'config' | 'builtin'; api: string | null; base_url: string | null; key: 'set' | 'missing' | 'not needed' }[] = [
    { provider: MOCK_PROVIDER, model: 'echo', source: 'mock', api: 'mock', base_url: null, key: 'not needed' },
  ];
  for (const [provider, settings] of Object.entries(config.providers)) {
    if (provider === MOCK_PROVIDER) continue;
    const keyEnvs = keyVariables(config, provider, BUILTIN_PROVIDERS[provider]?.keyEnv ?? null);
    const key = settings.api_key || keyEnvs.some((name) => process.env[name]) ? 'set' : settings.base_url ? 'not needed' : 'missing';
    for (const model of settings.models?.length ? settings.models.map((m) => m.id) : [null]) {
      rows.push({ provider, model, source: 'config', api: settings.api ?? null, base_url: settings.base_url ?? null, key });
    }
  }
  for (const [provider, { keyEnv, defaultModel }] of Object.entries(BUILTIN_PROVIDERS)) {
    if (config.providers[provider]?.models?.length) continue;
    rows.push({ provider, model: defaultModel, source: 'builtin', api: null, base_url: null, key: process.env[keyEnv] ? 'set' : 'missing' });
  }
  if (options.json) return printJson(rows);
  const { provider, model } = chooseModel(config, {}, process.env);
  printLines([
    `default: ${provider}/${model ?? '(provider default)'}`,
    ...rows.map((row) => `${row.provider}/${row.model ?? '*'}  ${row.source}${row.base_url ? ` ${row.base_url}` : ''}  key ${row.key}`),
  ]);
}

export async function modelResolve(options: Json & { provider?: string; model?: string }): Promise<void> {
  const resolved = await resolveModel(loadPaiConfig(resolveHome()), options);
  const out = {
    provider: resolved.provider,
    model: resolved.model,
    context_window: resolved.contextWindow,
    max_output_tokens: resolved.maxOutputTokens,
    api: resolved.api,
    base_url: resolved.baseUrl,
  };
  if (options.json) printJson(out);
  else printLines([`${out.provider}/${out.model}  context ${out.context_window}  max output ${out.max_output_tokens}  api ${out.api}${out.base_url ? `  ${out.base_url}` : ''}`]);
}

export async function modelDefault(value: string | undefined, options: Json): Promise<void> {
  const home = resolveHome();
  if (value !== undefined) {
    if (!/^[^/\s]+\/\S+$/.test(value)) throw usageError(`${JSON.stringify(value)} is not provider/model`, 'e.g. pai model default openai/gpt-4o-mini');
    const [provider, ...rest] = value.split('/');
    // Refuse a default that would not resolve, before it is stored.
    await resolveModel(loadPaiConfig(home), { provider, model: rest.join('/') });
    setYamlConfigKey(paiConfigPath(home), 'default', value);
  }
  const { provider, model } = chooseModel(loadPaiConfig(home), {}, process.env);
  const current = `${provider}/${model ?? BUILTIN_PROVIDERS[provider]?.defaultModel ?? ''}`;
  if (options.json) printJson({ default: current });
  else printLines([current]);
}

export async function configShow(options: Json): Promise<void> {
  const config = loadPaiConfig(resolveHome());
  const shown = {
    ...config,
    providers: Object.fromEntries(Object.entries(config.providers).map(([name, p]) => [name, p.api_key ? { ...p, api_key: '[redacted]' } : p])),
  };
  if (options.json) printJson(shown);
  else process.stdout.write(yaml().stringify(shown));
}

export async function transcribeCommand(file: string, options: Json): Promise<void> {
  const config = loadPaiConfig(resolveHome());
  const text = await transcribe({ path: file }, { config });
  if (options.json) printJson({ text, model: config.transcription?.model });
  else printLines([text]);
}

function readText(file: string, flag: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new ClawError(errnoCode(error) === 'ENOENT' ? 'not_found' : 'io', `cannot read ${flag} ${file}: ${(error as Error).message}`, {
      suggestion: `check the path given to ${flag}`,
    });
  }
}
