import { existsSync } from 'node:fs';
import { runDaemon } from '../core/daemon.js';
import { ClawError } from '../core/errors.js';
import { daemonLogFile, agentRoot } from '../core/layout.js';
import { createLogger, type Logger } from '../core/logger.js';
import { validate } from '../core/validate.js';
import { answerFetch, createAddressGuard, loadWebConfig, parseServiceFetch, preloadReader } from '../web/index.js';
import { browserProfileDir, loadBrowserLimits } from './limits.js';
import { browserMemoryBytes } from './memory.js';
import { AgentBrowser, loadPlaywright } from './session.js';
import { DEFAULT_BROWSER_LIMITS, ServiceRequestSchema, type BrowserCommand, type BrowserLimits, type BrowserReply, type RunningBrowser } from './types.js';

/**
 * The browser service (`browser start`): one per home, outside every sandbox, holding one
 * Chromium per agent. Its control socket is in the home's run/ directory, which no sandbox sees;
 * a turn reaches it only through its run's proxy (proxy.ts), which names the turn's own agent.
 * Each agent's commands run one at a time. A browser closes after `idle_minutes` without a
 * command, and is closed when its memory passes `max_memory_mb` (the next command starts it
 * again); the service itself stops once it has had no browser open for the default idle time.
 * It does `web fetch` for thin clients too (web/fetch-door.ts): warm, a page costs its reading,
 * not a Node process loading the reader. Once its first request is answered it loads what the
 * next ones would (playwright-core, the article reader), so that they find it loaded.
 */

const MEMORY_CHECK_MS = 15_000;
const PRELOAD_AFTER_COMMAND_MS = 1_000;
/**
 * A service whose home was removed (a test's temporary home, a reset) has no one to serve and no
 * socket to be stopped through: it stops itself, its browsers with it, rather than running on.
 */
const HOME_CHECK_MS = 2_000;

interface Held {
  browser: AgentBrowser;
  limits: BrowserLimits;
  /** The commands so far, one after another. */
  queue: Promise<unknown>;
  idle?: NodeJS.Timeout;
  /** Said with the next reply: why the browser was restarted meanwhile. */
  note?: string;
}

export async function serveBrowsers(home: string): Promise<void> {
  await runDaemon(home, 'browser', async () => {
    const logger = createLogger(daemonLogFile(home, 'browser'));
    const held = new Map<string, Held>();
    let fetching = 0;
    /** Waiting for the fetches under way to end. */
    const noFetch: (() => void)[] = [];
    let emptyTimer: NodeJS.Timeout | undefined;
    const stopWhenEmpty = () => {
      clearTimeout(emptyTimer);
      if ([...held.values()].some((entry) => entry.browser.running)) return;
      emptyTimer = setTimeout(() => process.kill(process.pid, 'SIGTERM'), DEFAULT_BROWSER_LIMITS.idle_minutes * 60_000);
    };
    let preloaded = false;
    let preloadTimer: NodeJS.Timeout | undefined;
    /**
     * Once the first request is answered, what the next ones would load: the article reader and
     * playwright-core, whichever the first did not. Not before: a cold `browser open` must not
     * wait for the reader, nor a first `web fetch` for playwright-core, whose load holds this
     * process for ~0.7 s of CPU (a CommonJS tree, evaluated at once) and so waits until no fetch
     * is under way. After a command, once the browser has had none for a moment: the next one (a
     * snapshot after an open) comes at once. What fails to load is reported by the request that needs it.
     */
    const preloadTheRest = (afterMs: number) => {
      clearTimeout(preloadTimer);
      if (preloaded) return;
      preloadTimer = setTimeout(() => {
        preloaded = true;
        void preloadReader()
          .then(() => (fetching > 0 ? new Promise<void>((resume) => noFetch.push(resume)) : undefined))
          .then(loadPlaywright)
          .catch(() => {});
      }, afterMs).unref();
    };
    const memoryCheck = setInterval(() => checkMemory(held, logger), MEMORY_CHECK_MS);
    memoryCheck.unref();
    const homeCheck = setInterval(() => existsSync(home) || process.kill(process.pid, 'SIGTERM'), HOME_CHECK_MS);
    homeCheck.unref();
    return {
      async handle(raw) {
        const op = (raw as { op?: unknown } | null)?.op;
        if (op === 'status') return { browsers: runningBrowsers(held) };
        if (op === 'fetch') {
          const request = parseServiceFetch(raw);
          if (request.agent) requireAgent(home, request.agent);
          logger.debug(`${request.agent ?? 'the owner'}: web fetch`);
          clearTimeout(emptyTimer);
          fetching++;
          return answerFetch(home, request).finally(() => {
            if (--fetching === 0)
              setImmediate(() => {
                for (const resume of noFetch.splice(0)) resume();
              });
            stopWhenEmpty();
            preloadTheRest(0);
          });
        }
        const { agent, command } = validate(ServiceRequestSchema, raw, { what: 'browser request', kind: 'usage', suggestion: 'send {"op":"command","agent":<id>,"command":{...}}' });
        requireAgent(home, agent);
        clearTimeout(emptyTimer);
        clearTimeout(preloadTimer);
        const entry = heldFor(home, agent, held);
        entry.limits = loadBrowserLimits(home, agent);
        const reply = entry.queue.then(() => runOne(entry, command, logger, agent));
        entry.queue = reply.catch(() => {});
        try {
          return await reply;
        } finally {
          clearTimeout(entry.idle);
          if (entry.browser.running) {
            entry.idle = setTimeout(() => {
              logger.info(`closing ${agent}'s browser after ${entry.limits.idle_minutes} min idle`);
              void entry.browser.close().then(stopWhenEmpty);
            }, entry.limits.idle_minutes * 60_000);
          }
          stopWhenEmpty();
          preloadTheRest(PRELOAD_AFTER_COMMAND_MS);
        }
      },
      listening() {
        stopWhenEmpty();
      },
      async shutdown() {
        clearInterval(memoryCheck);
        clearInterval(homeCheck);
        clearTimeout(emptyTimer);
        for (const entry of held.values()) clearTimeout(entry.idle);
        await Promise.all([...held.values()].map((entry) => entry.browser.close()));
        logger.info('browser service stopped');
      },
    };
  });
}

function requireAgent(home: string, agent: string): void {
  if (!existsSync(agentRoot(home, agent))) throw new ClawError('not_found', `there is no agent ${agent}`, { suggestion: 'name one of the agents (theclaw status lists them)' });
}

function heldFor(home: string, agent: string, held: Map<string, Held>): Held {
  let entry = held.get(agent);
  if (!entry) {
    const created: Held = { limits: DEFAULT_BROWSER_LIMITS, queue: Promise.resolve(), browser: undefined as unknown as AgentBrowser };
    // The web tool's allow_private, read at each request: a change applies without a restart.
    created.browser = new AgentBrowser(
      browserProfileDir(home, agent),
      () => created.limits,
      () => createAddressGuard(loadWebConfig(home).allow_private),
    );
    held.set(agent, created);
    entry = created;
  }
  return entry;
}

async function runOne(entry: Held, command: BrowserCommand, logger: Logger, agent: string): Promise<BrowserReply> {
  logger.debug(`${agent}: ${command.name}`);
  const reply = await entry.browser.run(command);
  if (!entry.note) return reply;
  const note = entry.note;
  entry.note = undefined;
  return { ...reply, text: `${note}\n${reply.text}` };
}

function runningBrowsers(held: Map<string, Held>): RunningBrowser[] {
  return [...held].filter(([, entry]) => entry.browser.running).map(([agent, entry]) => ({ agent, pages: entry.browser.pages, memory_bytes: browserMemoryBytes(entry.browser.profileDir) }));
}

/** Closes the browsers over their memory cap; the next command starts a fresh one, and says so. */
function checkMemory(held: Map<string, Held>, logger: Logger): void {
  for (const [agent, entry] of held) {
    if (!entry.browser.running) continue;
    const used = browserMemoryBytes(entry.browser.profileDir);
    if (used <= entry.limits.max_memory_mb * 1024 * 1024) continue;
    logger.warn(`${agent}'s browser uses ${Math.round(used / 1048576)} MB, over its ${entry.limits.max_memory_mb} MB: restarting it`);
    entry.note = `[The browser was restarted: it used ${Math.round(used / 1048576)} MB, over its limit of ${entry.limits.max_memory_mb} MB. Its pages were closed.]`;
    entry.queue = entry.queue.then(() => entry.browser.close());
  }
}
