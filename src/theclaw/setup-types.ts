/** The providers `theclaw setup` offers (setup.ts says how each is set up). */
export const SETUP_PROVIDERS = ['openai', 'anthropic', 'openrouter', 'ollama', 'openai-compatible', 'mock'] as const;
export type SetupProvider = (typeof SETUP_PROVIDERS)[number];

export function isSetupProvider(name: string): name is SetupProvider {
  return (SETUP_PROVIDERS as readonly string[]).includes(name);
}

/** `theclaw setup`'s flags. */
export interface SetupFlags {
  provider?: string;
  baseUrl?: string;
  model?: string;
  apiKeyStdin?: boolean;
  telegramTokenStdin?: boolean;
  telegramWaitSeconds: number;
  telegramApiRoot?: string;
  discordTokenStdin?: boolean;
  discordWaitSeconds: number;
  discordApiRoot?: string;
  yes?: boolean;
  json?: boolean;
}
