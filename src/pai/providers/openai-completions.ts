// Bundled (with the OpenAI SDK) into one chunk by tsup: see pi.ts.
export { streamSimpleOpenAICompletions as streamSimple } from '@mariozechner/pi-ai/openai-completions';
