import * as z from 'zod/mini';

/**
 * OpenAI's chat completions wire format, as far as the API channel speaks it: the request it
 * takes, the `chat.completion` object and `chat.completion.chunk` events it answers with, and the
 * error object. Field names are OpenAI's, verbatim, inside this file only.
 */

const ContentPartSchema = z.looseObject({ type: z.string(), text: z.optional(z.string()) });

const MessageSchema = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
  content: z.nullish(z.union([z.string(), z.array(ContentPartSchema)])),
});

/** The request; unknown fields (temperature, tools…) are taken and ignored: the agent decides those. */
export const ChatCompletionRequestSchema = z.looseObject({
  /** The agent, e.g. `admin`. */
  model: z.string().check(z.minLength(1)),
  messages: z.array(MessageSchema).check(z.minLength(1)),
  stream: z.optional(z.nullable(z.boolean())),
  /** The conversation; default: the client's one conversation. */
  user: z.optional(z.string().check(z.minLength(1), z.maxLength(128))),
});
export type ChatCompletionRequest = z.output<typeof ChatCompletionRequestSchema>;

/**
 * What the agent is asked: the last user message's text. The agent keeps the conversation's
 * history itself, so the earlier messages a client resends are not passed on again.
 */
export function lastUserText(request: ChatCompletionRequest): string | undefined {
  const last = request.messages.findLast((message) => message.role === 'user');
  const content = last?.content;
  if (typeof content === 'string') return content;
  return content
    ?.filter((part) => part.type === 'text' && typeof part.text === 'string')
    .map((part) => part.text)
    .join('\n');
}

/** The identity of one answer, the same in each chunk of it and for a retried request. */
export interface CompletionIdentity {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
}

/** The `chat.completion` object; usage is zero: the agent's turn, not this call, spends the tokens. */
export function completionObject(identity: CompletionIdentity, content: string): object {
  return {
    id: identity.id,
    object: 'chat.completion',
    created: identity.created,
    model: identity.model,
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
}

/** One server-sent event of a streamed answer: a `delta`, or (`finish`) the last chunk. */
export function chunkEvent(identity: CompletionIdentity, delta: { role?: 'assistant'; content?: string }, finish = false): string {
  const chunk = {
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish ? 'stop' : null }],
  };
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

export const DONE_EVENT = 'data: [DONE]\n\n';

/** An error as OpenAI sends it; `status` is the HTTP status it goes with. */
export interface ApiError {
  status: number;
  message: string;
  type: 'invalid_request_error' | 'authentication_error' | 'not_found_error' | 'rate_limit_error' | 'server_error';
  code: string | null;
  param?: string;
}

export function errorBody(error: ApiError): object {
  return { error: { message: error.message, type: error.type, param: error.param ?? null, code: error.code } };
}
