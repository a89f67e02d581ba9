export { checkAddress, checkUrl, createAddressGuard, guardedLookup, type AddressGuard, type Verdict } from './guard.js';
export * from './types.js';
