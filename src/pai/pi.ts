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
type StreamSimple = <TApi extends Api>(model: Model<TApi>, context: Context, options?: SimpleStreamOptions) => AssistantMessageEventStream;

interface PiStream {
  streamSimple: StreamSimple;
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

/**
 * The two wire protocols most agents use are bundled by tsup into one chunk each, with their
 * SDK: loading the OpenAI SDK file by file costs ~50 ms of every agent run, bundled ~20 ms
 * (`npm run bench`, the reply latency). Other protocols go through pi-ai's own registry.
 */
// Each provider's function is typed for its own protocol; the model passed is of that protocol.
const BUNDLED: Record<string, () => Promise<PiStream>> = {
  'openai-completions': () => import('./providers/openai-completions.js') as unknown as Promise<PiStream>,
  'anthropic-messages': () => import('./providers/anthropic-messages.js') as unknown as Promise<PiStream>,
};

/** The stream function for a wire protocol, loaded when a model is first called. */
export async function loadStreamFunction(api: string): Promise<StreamSimple> {
  const bundled = BUNDLED[api];
  return (bundled ? await bundled() : await loadPiStream()).streamSimple;
}

/**
 * Starts loading the stream function of `api` without waiting for it, for a caller that has
 * other work to do before its first call.
 */
export function preloadProvider(api: string): void {
  void loadStreamFunction(api).catch(() => {}); // a real failure shows on the real call
}

export async function loadPiModels(): Promise<PiModels> {
  return (await import(piFile('models.js'))) as PiModels;
}
