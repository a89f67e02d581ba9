export { checkAddress, checkUrl, createAddressGuard, guardedLookup, type AddressGuard, type Verdict } from './guard.js';
export { loadWebConfig } from './config.js';
export { DEFAULT_MAX_BYTES, DEFAULT_MAX_CHARS, DEFAULT_TIMEOUT_SECONDS, fetchPage, type WebContext } from './fetch.js';
export { formatPage, formatResults, untrustedHeader } from './format.js';
export { braveKey, DEFAULT_COUNT, parseResults, searchRequest, searchWeb } from './search.js';
export { searchFromHere, serveWebSearch, WEB_SEARCH_SOCKET_ENV } from './search-door.js';
export { checkSearchProvider, type SearchHealth } from './search-check.js';
export { createWebProgram } from './program.js';
export * from './types.js';
