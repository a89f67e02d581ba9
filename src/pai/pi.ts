import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Api, AssistantMessageEventStream, Context, KnownProvider, Model, SimpleStreamOptions } from '@mariozechner/pi-ai';
import { packageRoot } from '../core/package.js';

/**
 * The one place that loads pi-ai. Its index module also loads typebox and the tool-argument
 * validator (~190 ms of start-up on this machine), which pai does not use; every agent run pays
 * start-up, so only the two modules pai needs are loaded, by file, when a model is called. The
 * version is pinned exactly in package.json because these paths are not part of pi-ai's exports.
 */
interface PiStream {
  streamSimple<TApi extends Api>(model: Model<TApi>, context: Context, options?: SimpleStreamOptions): AssistantMessageEventStream;
  getEnvApiKey(provider: string): string | undefined;
}

interface PiModels {
  getModel(provider: KnownProvider, modelId: string): Model<Api> | undefined;
  getProviders(): KnownProvider[];
  getModels(provider: KnownProvider): Model<Api>[];
}

let piDir: string | undefined;

function piFile(file: string): string {
  if (!piDir) {
    // Node's resolution: the nearest node_modules on the way up from this package.
    for (let dir = packageRoot(); ; dir = dirname(dir)) {
      const candidate = join(dir, 'node_modules', '@mariozechner', 'pi-ai', 'dist');
      if (existsSync(join(candidate, 'stream.js'))) {
        piDir = candidate;
        break;
      }
      if (dirname(dir) === dir) throw new Error('cannot find @mariozechner/pi-ai; run npm install');
    }
  }
  return pathToFileURL(join(piDir, file)).href;
}

export async function loadPiStream(): Promise<PiStream> {
  return (await import(piFile('stream.js'))) as PiStream;
}

const PROVIDER_MODULES: Record<string, string> = {
  'openai-completions': 'providers/openai-completions.js',
  'openai-responses': 'providers/openai-responses.js',
  'anthropic-messages': 'providers/anthropic.js',
  'google-generative-ai': 'providers/google.js',
  'mistral-conversations': 'providers/mistral.js',
};

/**
 * Starts loading the provider module of `api` (and its SDK) without waiting for it. pi-ai loads
 * it on the first call anyway (the same module, so the same instance); a caller that has other
 * work to do first — reading its inbox — lets the file reads overlap with that work.
 */
export function preloadProvider(api: string): void {
  const file = PROVIDER_MODULES[api];
  if (file) void import(piFile(file)).catch(() => {}); // a real failure shows on the real call
}

export async function loadPiModels(): Promise<PiModels> {
  return (await import(piFile('models.js'))) as PiModels;
}
