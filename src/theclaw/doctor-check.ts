// Apart from doctor.ts so that the checks it runs from other modules (doctor-channels.ts) need not import it back.

export type CheckStatus = 'ok' | 'warn' | 'fail';

/** One finding: what was checked, what was found, and for a problem how to fix it. */
export interface Check {
  name:
    | 'node'
    | 'data directory'
    | 'config'
    | 'providers'
    | 'agents'
    | 'model'
    | 'search'
    | 'daemons'
    | 'channels'
    | 'ports'
    | 'locks'
    | 'pending'
    | 'errors'
    | 'threads'
    | 'sandbox'
    | 'browser'
    | 'store';
  status: CheckStatus;
  detail: string;
  fix?: string;
}
