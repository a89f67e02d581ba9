export { initThread, openThread, Thread, type OpenThreadOptions } from './thread.js';
export * from './dispatch/index.js';
export * from './store/index.js';
export { parseFilter, compileFilter, type FilterExpr, type CompiledFilter } from './filter.js';
export * from './types.js';
