import type { ConsumerInfo, PokeMessage, StoreKind, WakeMessage } from '../thread/index.js';
import type { TimerJson } from './timers.js';

/** A registered subscription as `notifier status` shows it. */
export interface SubscriptionStatus extends ConsumerInfo {
  thread: string;
}

/** What the daemon's control socket accepts, one JSON object per connection. */
export type NotifierRequest =
  | PokeMessage
  | WakeMessage
  /** Timers were added or removed: re-read them. */
  | { op: 'timers' }
  | { op: 'status' }
  /** Read the config file again and apply it. Answer: NotifierReloadResult; a config that does not load is refused (the running one kept). */
  | { op: 'reload' }
  | { op: 'stop' }
  | { op: 'ping' };

/** `notifier status --json`. */
export interface NotifierStatus {
  running: boolean;
  pid: number | null;
  started_at: string | null;
  uptime_seconds: number | null;
  /** Handlers and timer commands running, waiting for a place, and warm runners (absent while stopped). */
  runs?: { running: number; waiting: number; limit: number; runners: number };
  /** Every registered subscription: progress, pending events, running handler, failures. */
  subscriptions: SubscriptionStatus[];
  timers: TimerJson[];
  /** The fingerprint of the config text the running daemon loaded (absent while stopped). */
  config_sha256?: string;
  /** The host the daemon runs on (`hostName`) and which store its threads are in (absent while stopped). */
  host?: string;
  store?: StoreKind;
}

/** What `reload` did: the top-level keys of the config that changed. */
export interface NotifierReloadResult {
  file: string;
  changed: string[];
  config_sha256: string;
}
