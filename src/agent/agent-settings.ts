import { ClawError, usageError } from '../core/errors.js';
import { configDocumentText, parseConfigDocument, readConfigText, writeFileAtomically, yaml } from '../core/config.js';
import { validate } from '../core/validate.js';
import { loadAgentConfig, requireAgent, type AgentDir } from './agent-dir.js';
import { ADDRESS_HINT, isPersonName, PERSON_ADDRESS, personOf } from './identities.js';
import { AgentConfigSchema } from './types.js';
import { agentModel, describeShortage, windowShortage } from './window-check.js';

/**
 * `agent config set`, `agent identity set` and `agent identity link|unlink`: an agent's config key,
 * IDENTITY.md and linked people changed from the command line (by the owner, or by the runtime for a turn, manage-door.ts). Either is
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

/**
 * Links `addresses` to the person `name` in the agent's `identities` (identities.ts), adding to
 * the ones linked before. An address linked to another person is refused. Returns the person's
 * addresses as stored.
 */
export function linkIdentity(home: string, id: string, name: string, addresses: readonly string[]): string[] {
  const dir = requireAgent(home, id);
  if (!isPersonName(name)) throw usageError(`${JSON.stringify(name)} is not a person's name`, 'name them with lower-case letters, digits, _ and -, e.g. alice');
  const identities = loadAgentConfig(dir).identities;
  for (const address of addresses) {
    if (!PERSON_ADDRESS.test(address)) throw usageError(`${JSON.stringify(address)} is not an address`, ADDRESS_HINT);
    const other = personOf(identities, address);
    if (other !== null && other !== name) throw usageError(`${address} is linked to ${other}`, `unlink it first: agent identity unlink ${id} ${other} ${address}`);
  }
  const linked = [...new Set([...(identities[name] ?? []), ...addresses])];
  editIdentities(dir, name, linked);
  return linked;
}

/** Unlinks `addresses` from the person `name`, or the person whole when none are given. Returns what is left linked. */
export function unlinkIdentity(home: string, id: string, name: string, addresses: readonly string[]): string[] {
  const dir = requireAgent(home, id);
  const linked = loadAgentConfig(dir).identities[name];
  if (!linked) throw new ClawError('not_found', `${id} links no person named ${name}`, { suggestion: `see them with: agent identity list ${id}` });
  const missing = addresses.find((address) => !linked.includes(address));
  if (missing) throw new ClawError('not_found', `${missing} is not linked to ${name}`, { suggestion: `${name}'s addresses: ${linked.join(' ')}` });
  const left = addresses.length === 0 ? [] : linked.filter((address) => !addresses.includes(address));
  editIdentities(dir, name, left);
  return left;
}

/** The person's addresses written into config.yaml (none: the person goes), checked whole first. */
function editIdentities(dir: AgentDir, name: string, addresses: string[]): void {
  const text = readConfigText(dir.config);
  const document = parseConfigDocument(dir.config, text);
  if (addresses.length === 0) document.deleteIn(['identities', name]);
  else document.setIn(['identities', name], addresses);
  const changed = configDocumentText(document);
  validate(AgentConfigSchema, yaml().parse(changed), { what: `identities of ${dir.id}`, kind: 'usage', suggestion: `see them in ${dir.config}; nothing was changed` });
  writeFileAtomically(dir.config, changed);
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
