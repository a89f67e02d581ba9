import { SETUP_PROVIDERS } from './program.js';

export { SETUP_PROVIDERS };
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
  yes?: boolean;
  json?: boolean;
}
