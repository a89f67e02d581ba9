import { relative } from 'node:path';
import { configChangedSince } from '../core/config.js';
import type { DaemonName } from '../core/daemon.js';
import { notifierConfigPath, xgwConfigPath } from '../core/layout.js';
import type { NotifierStatus } from '../notifier/index.js';
import type { XgwStatus } from '../xgw/index.js';

/** A running daemon's config file that is not the text it runs with. */
export interface ChangedConfig {
  daemon: DaemonName;
  /** Relative to THECLAW_HOME. */
  file: string;
  /** What `theclaw status` and `theclaw up` say of it. */
  message: string;
}

/** The running daemons whose config file differs from the text they loaded (by its fingerprint, which each reports). */
export function changedConfigs(home: string, notifier: NotifierStatus | null, xgw: XgwStatus | null): ChangedConfig[] {
  const loaded: [DaemonName, string, string | null | undefined][] = [
    ['notifier', notifierConfigPath(home), notifier?.config_sha256],
    ['xgw', xgwConfigPath(home), xgw?.config_sha256],
  ];
  return loaded
    .filter(([, file, sha256]) => configChangedSince(file, sha256))
    .map(([daemon, path]) => {
      const file = relative(home, path);
      return { daemon, file, message: `${file} changed since ${daemon} loaded it - run theclaw reload` };
    });
}
