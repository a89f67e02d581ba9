// Bundled (with the Anthropic SDK) into one chunk by tsup: see pi.ts.
export { streamSimpleAnthropic as streamSimple } from '@mariozechner/pi-ai/anthropic';
