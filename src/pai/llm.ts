import { readFileSync } from 'node:fs';
import { yaml } from '../core/config.js';
import * as z from 'zod/mini';
import { ClawError } from '../core/errors.js';
import { validate } from '../core/validate.js';
import { BASH_EXEC_TOOL } from './bash-exec.js';
import { classify, observeHttp } from './model-error.js';
import { loadStreamFunction } from './pi.js';
import type { Context, ImageContent, Message, TextContent } from '@mariozechner/pi-ai';
import type { ImageRef, SessionLine, SessionToolCall } from './session.js';
import type { ModelError, ResolvedModel, Usage } from './types.js';

/**
 * One model call: the conversation so far in, one assistant message (text and tool calls) or a
 * classified error out. Failures are data here (`{ ok: false }`); the tool loop decides about
 * retries. Two implementations: pi-ai for real providers, and the offline mock.
 */
export interface ModelRequest {
  system: string;
  history: SessionLine[];
  tools: boolean;
}

export interface ModelReply {
  text: string;
  toolCalls: SessionToolCall[];
  usage: Usage;
}

export type CallResult = { ok: true; reply: ModelReply } | { ok: false; error: ModelError };

export interface CallOptions {
  signal?: AbortSignal;
  onDelta?: (text: string) => void;
}

export type ModelCaller = (request: ModelRequest, options: CallOptions) => Promise<CallResult>;

export interface CallerSettings {
  apiKey: string | undefined;
  /**
   * The provider is a server the user configured (`providers.<p>.base_url`), which may need no
   * key: a missing one is sent as the placeholder `none`. Default: false — a built-in provider
   * without its key fails at once, without a request.
   */
  keyless?: boolean;
  /** Abort a call that sends nothing for this long. */
  idleTimeoutMs: number;
  env: NodeJS.ProcessEnv;
  /** The mock's script file, if any. */
  mockScript?: string;
  /** pi-ai's reasoning level for the call; none: the model's own default, without thinking asked for. */
  reasoning?: ReasoningLevel;
}

/** The levels `/think` offers (pi-ai clamps them to what the model supports). */
export type ReasoningLevel = 'low' | 'medium' | 'high';

export function createModelCaller(model: ResolvedModel, settings: CallerSettings): ModelCaller {
  return model.api === 'mock' ? createMockCaller(settings) : createPiCaller(model, settings);
}

function createPiCaller(resolved: ResolvedModel, settings: CallerSettings): ModelCaller {
  const model = {
    id: resolved.model,
    name: resolved.model,
    api: resolved.api,
    provider: resolved.provider,
    baseUrl: resolved.baseUrl ?? '',
    // Told to pi-ai only when a level is asked for: it then sends the provider's reasoning option.
    reasoning: settings.reasoning !== undefined,
    input: resolved.images ? ['text' as const, 'image' as const] : ['text' as const],
    cost: { input: resolved.cost.input, output: resolved.cost.output, cacheRead: 0, cacheWrite: 0 },
    contextWindow: resolved.contextWindow,
    maxTokens: resolved.maxOutputTokens,
  };
  // A local server needs no key, but the SDKs refuse an empty one.
  const apiKey = settings.apiKey || (settings.keyless ? 'none' : undefined);
  return async (request, { signal, onDelta }) => {
    if (apiKey === undefined) {
      // Not worth a request that can only be refused; status null says no credentials were sent.
      return { ok: false, error: { kind: 'auth', recoverable: false, status: null, message: 'no API key', retryAfterMs: null } };
    }
    const streamSimple = await loadStreamFunction(resolved.api);
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let timedOut = false;
    let idle: NodeJS.Timeout | undefined;
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, settings.idleTimeoutMs);
    };
    try {
      return await observeHttp(async (observation) => {
        touch();
        const stream = streamSimple(model, toPiContext(request, resolved), {
          apiKey,
          signal: controller.signal,
          // Retries are ours, decided by class; the SDKs' own would double them.
          maxRetries: 0,
          maxTokens: resolved.maxOutputTokens,
          reasoning: settings.reasoning,
        });
        for await (const event of stream) {
          touch();
          if (event.type === 'text_delta') onDelta?.(event.delta);
        }
        const message = await stream.result();
        if (message.stopReason === 'error' || message.stopReason === 'aborted') {
          return { ok: false, error: classify({ observation, aborted: signal?.aborted ?? false, timedOut, message: message.errorMessage ?? '' }) };
        }
        const text = message.content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('');
        const toolCalls = message.content.flatMap((block) => (block.type === 'toolCall' ? [{ id: block.id, name: block.name, arguments: block.arguments as Record<string, unknown> }] : []));
        const usage: Usage = {
          input: message.usage.input,
          output: message.usage.output,
          cache_read: message.usage.cacheRead,
          cache_write: message.usage.cacheWrite,
          cost: message.usage.cost.total,
        };
        return { ok: true, reply: { text, toolCalls, usage } };
      });
    } finally {
      clearTimeout(idle);
      signal?.removeEventListener('abort', onAbort);
    }
  };
}

/**
 * An image of a user message, read now: the session keeps its path, not its bytes. One gone
 * meanwhile is said in words rather than failing the turn.
 */
function imageContent(image: ImageRef): ImageContent | TextContent {
  try {
    return { type: 'image', data: readFileSync(image.path).toString('base64'), mimeType: image.mime_type };
  } catch {
    return { type: 'text', text: `[an image that is no longer there: ${image.path}]` };
  }
}

/** Session lines as pi-ai messages. History is presented as this model's own. */
function toPiContext(request: ModelRequest, resolved: ResolvedModel): Context {
  const zeroUsage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  const timestamp = Date.now();
  // biome-ignore lint/suspicious/useIterableCallbackReturn: the switch covers every role of a session line, as TypeScript checks.
  const messages = request.history.flatMap((line): Message[] => {
    switch (line.role) {
      case 'system':
        return [];
      case 'user':
        return [{ role: 'user' as const, content: line.images?.length ? [{ type: 'text' as const, text: line.content }, ...line.images.map(imageContent)] : line.content, timestamp }];
      case 'assistant':
        return [
          {
            role: 'assistant' as const,
            content: [
              ...(line.content ? [{ type: 'text' as const, text: line.content }] : []),
              ...(line.tool_calls ?? []).map((call) => ({ type: 'toolCall' as const, id: call.id, name: call.name, arguments: call.arguments })),
            ],
            api: resolved.api,
            provider: resolved.provider,
            model: resolved.model,
            usage: zeroUsage,
            stopReason: line.tool_calls?.length ? ('toolUse' as const) : ('stop' as const),
            timestamp,
          },
        ];
      case 'tool':
        return [{ role: 'toolResult' as const, toolCallId: line.tool_call_id, toolName: line.name, content: [{ type: 'text' as const, text: line.content }], isError: false, timestamp }];
    }
  });
  return {
    systemPrompt: request.system,
    messages,
    // pi-ai types parameters as a TypeBox schema; at run time it is JSON Schema either way.
    tools: request.tools ? [BASH_EXEC_TOOL as never] : [],
  };
}

const MockScriptSchema = z.array(z.union([z.strictObject({ text: z.string() }), z.strictObject({ bash: z.string().check(z.minLength(1)), comment: z.optional(z.string()) })]));

/**
 * The offline mock: deterministic, labelled, no network. It echoes the user, or follows a script
 * (YAML or JSON list of `{text: ...}` and `{bash: <command>}` steps) where the n-th reply of a
 * conversation is step n, so a scripted tool loop works across processes and turns.
 */
function createMockCaller(settings: CallerSettings): ModelCaller {
  const scriptFile = settings.mockScript ?? settings.env.PAI_MOCK_SCRIPT;
  let script: z.output<typeof MockScriptSchema> | undefined;
  return async (request, { signal, onDelta }) => {
    if (signal?.aborted) return { ok: false, error: { kind: 'aborted', recoverable: false, status: null, message: 'aborted', retryAfterMs: null } };
    if (scriptFile && !script) script = loadScript(scriptFile);
    const replies = request.history.filter((line) => line.role === 'assistant').length;
    const step = script?.[replies];
    let reply: ModelReply;
    if (step && 'bash' in step && request.tools) {
      const call = { id: `mock-call-${replies + 1}`, name: BASH_EXEC_TOOL.name, arguments: { command: step.bash, ...(step.comment ? { comment: step.comment } : {}) } };
      reply = { text: '', toolCalls: [call], usage: mockUsage(request, '') };
    } else {
      const text = `[offline mock] ${step && 'text' in step ? step.text : echo(request.history)}`;
      onDelta?.(text);
      reply = { text, toolCalls: [], usage: mockUsage(request, text) };
    }
    return { ok: true, reply };
  };
}

function loadScript(file: string): z.output<typeof MockScriptSchema> {
  let raw: unknown;
  try {
    raw = yaml().parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ClawError('invalid', `cannot read the mock script ${file}: ${(error as Error).message}`, { suggestion: 'give a YAML list of {text: ...} and {bash: ...} steps' });
  }
  return validate(MockScriptSchema, raw, { what: `mock script ${file}`, suggestion: 'give a YAML list of {text: ...} and {bash: ...} steps' });
}

function echo(history: SessionLine[]): string {
  const last = history.at(-1);
  if (last?.role === 'tool') {
    const result = JSON.parse(last.content) as { exit_code?: number; stdout?: string };
    return `The command exited ${result.exit_code}. Its output began: ${(result.stdout ?? '').split('\n')[0]!.slice(0, 200)}`;
  }
  const user = [...history].reverse().find((line) => line.role === 'user');
  return `You said: ${user?.content ?? ''}`;
}

function mockUsage(request: ModelRequest, text: string): Usage {
  const input = Math.ceil((request.system.length + JSON.stringify(request.history).length) / 4);
  return { input, output: Math.ceil(text.length / 4), cache_read: 0, cache_write: 0, cost: 0 };
}
