import { loadYamlConfig } from '../core/config.js';
import { webConfigPath } from '../core/layout.js';
import { WebConfigSchema, type WebConfig } from './types.js';

/**
 * `$THECLAW_HOME/web/config.yaml`; no file is the defaults (nothing private allowed, no search
 * provider). In an agent's sandbox the file is bound read-only (it holds no secrets), so a turn's
 * `web fetch` honours the owner's allow_private.
 */
export function loadWebConfig(home: string): WebConfig {
  return loadYamlConfig(webConfigPath(home), WebConfigSchema);
}
