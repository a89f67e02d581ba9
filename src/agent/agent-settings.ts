import { ClawError, usageError } from '../core/errors.js';
import { configDocumentText, parseConfigDocument, readConfigText, writeFileAtomically, yaml } from '../core/config.js';
import { validate } from '../core/validate.js';
import { loadAgentConfig, requireAgent, type AgentDir } from './agent-dir.js';
import { AgentConfigSchema } from './types.js';
import { agentModel, describeShortage, windowShortage } from './window-check.js';

/**
 * `agent config set` and `agent identity set`: an agent's config key and IDENTITY.md changed from
 * the command line (by the owner, or by the runtime for a turn, manage-door.ts). Either is
 * checked as a whole before it is written, and written whole: a change that would leave the
 * agent unable to start is refused, and the file stays as it was.
 */

/**
 * Sets `key` (a dotted path, `pai.model`) to `value`, read as YAML (`3`, `true`, `[a/b, c/d]`;
 * anything else stays text). Returns the value as stored.
 */
export function setConfigKey(home: string, id: string, key: string, value: string): unknown {
  const dir = requireAgent(home, id);
  const path = key.split('.');
  if (path.some((part) => !/^[a-z_]+$/.test(part))) throw usageError(`${JSON.stringify(key)} is not a config key`, 'give a dotted key like pai.model or context.recent_messages');
  const parsed = parseValue(value);
  const text = readConfigText(dir.config);
  const document = parseConfigDocument(dir.config, text);
  document.setIn(path, parsed);
  const changed = configDocumentText(document);
  validate(AgentConfigSchema, yaml().parse(changed), { what: `${key} for ${id}`, kind: 'usage', suggestion: `see the keys in ${dir.config}; nothing was changed` });
  writeFileAtomically(dir.config, changed);
  return parsed;
}

function parseValue(value: string): unknown {
  try {
    return yaml().parse(value) ?? value;
  } catch {
    return value;
  }
}

/** Replaces IDENTITY.md, once the agent's model has room for it beside its memory caps (window-check.ts). */
export async function setIdentity(home: string, id: string, text: string, env: NodeJS.ProcessEnv = process.env): Promise<AgentDir> {
  const dir = requireAgent(home, id);
  if (text.trim() === '') throw usageError('the identity is empty', `give ${id}'s system prompt with --text or on stdin`);
  const config = loadAgentConfig(dir);
  const model = await agentModel(home, config, env);
  const shortage = model && windowShortage(text.trim(), config, model);
  if (shortage) throw new ClawError('invalid', describeShortage(shortage), { suggestion: 'write a shorter identity; IDENTITY.md was not changed' });
  writeFileAtomically(dir.identity, text.endsWith('\n') ? text : `${text}\n`);
  return dir;
}
