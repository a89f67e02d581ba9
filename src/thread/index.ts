export { initThread, openThread, Thread, type OpenThreadOptions } from './thread.js';
export { spawnLaunch, startHandler, type Launched, type Launcher, type LaunchResult, type SpawnedHandler, type StartHandlerOptions, type StartResult } from './dispatch/handler.js';
export { listThreads, registerThread, unregisterThread, registryDir } from './dispatch/registry.js';
export { pokeNotifier, wakeNotifier, type PokeMessage, type WakeMessage } from './dispatch/poke.js';
export { parseFilter, compileFilter, type FilterExpr, type CompiledFilter } from './filter.js';
export * from './types.js';
