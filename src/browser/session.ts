import type { BrowserContext, Locator, Page } from 'playwright-core';
import { ClawError } from '../core/errors.js';
import { ensureDir } from '../core/home.js';
import { checkUrl, untrustedHeader, type AddressGuard } from '../web/index.js';
import { chromiumExecutable } from './limits.js';
import { startGuardProxy } from './guard-proxy.js';
import { guardContext, type Resolve } from './request-guard.js';
import type { BrowserCommand, BrowserLimits, BrowserReply } from './types.js';

// The flags keep Debian's chromium from calling home (updates, sync, background fetches).
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  // WebRTC's UDP would not pass through the guard proxy: only proxied connections are allowed.
  '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
];

/**
 * playwright-core, loaded when first needed rather than with this module: loading it costs a
 * process ~1.3 s of CPU, which the service's start (and a `web fetch` that starts the service)
 * must not wait for. The service preloads it once its socket answers (service.ts).
 */
export function loadPlaywright(): Promise<typeof import('playwright-core')> {
  return import('playwright-core');
}

/** How long an action (a click, typing) waits for its element. */
const ACTION_TIMEOUT_MS = 5_000;
/** A snapshot is cut here: a huge page must not fill the model's context. */
const MAX_SNAPSHOT_CHARS = 40_000;

/** Seams for tests: a stand-in for DNS, and Chromium flags to go with it. */
export interface AgentBrowserOptions {
  /** How the guard resolves names. Default: the system's resolver. */
  resolve?: Resolve;
  /** More Chromium flags (a test's `--host-resolver-rules`). */
  chromiumArgs?: string[];
}

/**
 * One agent's browser: a headless Chromium with a persistent profile, started by the first
 * command. Refs (`[ref=eN]`) are those of Playwright's aria snapshot in its "ai" mode; each page
 * remembers the refs of its latest snapshot, forgotten when the page navigates, so that a ref
 * from an older snapshot is refused at once with what to do rather than waited for.
 */
export class AgentBrowser {
  private context: BrowserContext | null = null;
  private current: Page | null = null;
  private readonly refs = new WeakMap<Page, Set<string>>();
  /** The latest refusal of the request guard per URL, to say why a navigation failed. */
  private readonly refusals = new Map<string, string>();

  constructor(
    readonly profileDir: string,
    private readonly limits: () => BrowserLimits,
    private readonly guard: () => AddressGuard,
    private readonly options: AgentBrowserOptions = {},
  ) {}

  get running(): boolean {
    return this.context !== null;
  }

  /** Open pages (tabs); 0 when the browser is closed. */
  get pages(): number {
    return this.context?.pages().length ?? 0;
  }

  async run(command: BrowserCommand): Promise<BrowserReply> {
    if (command.name === 'close') {
      const was = this.running;
      await this.close();
      return { text: was ? 'Closed the browser (its profile stays: cookies and logins are kept).' : 'The browser was not open.' };
    }
    // The agent's limits are read at each command: a changed navigation timeout applies to a running browser too.
    this.context?.setDefaultNavigationTimeout(this.navigationTimeoutMs());
    if (command.name === 'open') return this.open(command.url, command.new_tab ?? false);
    const page = await this.page();
    switch (command.name) {
      case 'snapshot':
        return { text: await this.snapshot(page) };
      case 'click':
        await (await this.locate(page, command.ref)).click({ timeout: ACTION_TIMEOUT_MS });
        return this.after(page, `Clicked ${command.ref}.`);
      case 'type': {
        const target = await this.locate(page, command.ref);
        await target.fill(command.text, { timeout: ACTION_TIMEOUT_MS });
        if (command.submit) await target.press('Enter', { timeout: ACTION_TIMEOUT_MS });
        return this.after(page, `Typed into ${command.ref}${command.submit ? ' and submitted' : ''}.`);
      }
      case 'select':
        await (await this.locate(page, command.ref)).selectOption(command.value, { timeout: ACTION_TIMEOUT_MS });
        return this.after(page, `Selected ${JSON.stringify(command.value)} in ${command.ref}.`);
      case 'press':
        await page.keyboard.press(command.key);
        return this.after(page, `Pressed ${command.key}.`);
      case 'wait':
        if (command.text !== undefined) await page.getByText(command.text).first().waitFor({ timeout: this.navigationTimeoutMs() });
        else await page.waitForTimeout(command.ms ?? 1_000);
        return this.after(page, command.text !== undefined ? `${JSON.stringify(command.text)} is on the page.` : `Waited ${command.ms ?? 1_000} ms.`);
      case 'back':
        if ((await page.goBack()) === null) throw new ClawError('usage', 'there is no earlier page in this tab', { suggestion: 'open a URL with: browser open <url>' });
        return this.after(page, 'Went back.');
      case 'tabs':
        return { text: await this.tabs(command.select) };
      case 'screenshot':
        return { text: `Screenshot of ${page.url()}.`, file: { base64: (await page.screenshot({ fullPage: command.full ?? false, type: 'png' })).toString('base64'), extension: 'png' } };
      case 'pdf':
        return { text: `PDF of ${page.url()}.`, file: { base64: (await page.pdf()).toString('base64'), extension: 'pdf' } };
    }
  }

  async close(): Promise<void> {
    const context = this.context;
    this.context = null;
    this.current = null;
    await context?.close().catch(() => {});
  }

  private navigationTimeoutMs(): number {
    return this.limits().navigation_timeout_seconds * 1000;
  }

  private async start(): Promise<BrowserContext> {
    if (this.context) return this.context;
    ensureDir(this.profileDir);
    const refused = (target: string, reason: string) => {
      this.refusals.set(target, reason);
      if (this.refusals.size > 100) this.refusals.delete(this.refusals.keys().next().value!);
    };
    // Chromium reaches the network only through the guard proxy, which resolves and checks each host itself.
    const proxy = await startGuardProxy(this.guard, refused, this.options.resolve);
    let context: BrowserContext;
    try {
      const { chromium } = await loadPlaywright();
      context = await chromium.launchPersistentContext(this.profileDir, {
        executablePath: chromiumExecutable(),
        headless: true,
        args: [...CHROMIUM_ARGS, ...(this.options.chromiumArgs ?? [])],
        proxy: { server: proxy.server },
        viewport: { width: 1280, height: 800 },
        acceptDownloads: false,
        // A service worker's requests would not pass through the route below.
        serviceWorkers: 'block',
      });
    } catch (error) {
      await proxy.close();
      throw error;
    }
    context.on('close', () => void proxy.close());
    context.setDefaultNavigationTimeout(this.navigationTimeoutMs());
    await guardContext(context, this.guard, refused, this.options.resolve);
    // A page a site opens (target=_blank, window.open) becomes the current one, within max_pages.
    context.on('page', (page) => {
      if (context.pages().length > this.limits().max_pages) void page.close();
      else this.watch(page);
    });
    context.on('close', () => {
      if (this.context === context) {
        this.context = null;
        this.current = null;
      }
    });
    this.context = context;
    for (const page of context.pages()) this.watch(page);
    return context;
  }

  private watch(page: Page): void {
    this.current = page;
    page.on('framenavigated', (frame) => {
      if (frame === page.mainFrame()) this.refs.delete(page);
    });
    page.on('close', () => {
      if (this.current === page) this.current = this.context?.pages().at(-1) ?? null;
    });
  }

  private async page(): Promise<Page> {
    if (this.current && !this.current.isClosed()) return this.current;
    const context = await this.start();
    return this.current && !this.current.isClosed() ? this.current : context.newPage();
  }

  private async open(text: string, newTab: boolean): Promise<BrowserReply> {
    const url = checkUrl(text, this.guard()); // other schemes, and refused literal addresses, before anything starts
    const context = await this.start();
    let page: Page;
    if (newTab) {
      if (context.pages().length >= this.limits().max_pages) {
        throw new ClawError('usage', `this browser has ${context.pages().length} tabs open, its limit`, { suggestion: 'open the page in the current tab (without --new-tab), or close the browser' });
      }
      page = await context.newPage();
      this.current = page;
    } else page = await this.page();
    // The route refuses by URL; the proxy refuses an https or WebSocket tunnel by host and port.
    const targets = [url.href, `${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`];
    for (const target of targets) this.refusals.delete(target);
    let failure: unknown;
    await page.goto(url.href, { waitUntil: 'domcontentloaded' }).catch((error: unknown) => {
      failure = error ?? new Error('navigation failed');
    });
    const refusal = targets.map((target) => this.refusals.get(target)).find(Boolean);
    if (refusal) {
      throw new ClawError('usage', `refused to open ${url.host}: ${refusal}`, {
        suggestion: 'only public addresses are opened; the owner can allow a private host or network in $THECLAW_HOME/web/config.yaml (allow_private)',
      });
    }
    if (failure) throw new ClawError('upstream', `could not open ${url.href}: ${firstLine(failure)}`, { suggestion: 'check the URL, or try again later' });
    return this.after(page, `Opened ${page.url()}.`);
  }

  /** The page as text: a header marking it as untrusted, then the aria snapshot with refs. */
  private async snapshot(page: Page): Promise<string> {
    // Two round trips to Chromium at once: a warm click -> snapshot is a handful of them.
    const [tree, title] = await Promise.all([page.ariaSnapshot({ mode: 'ai', timeout: this.navigationTimeoutMs() }), page.title()]);
    this.refs.set(page, new Set(Array.from(tree.matchAll(/\[ref=((?:f\d+)?e\d+)\]/g), (match) => match[1]!)));
    const cut = tree.length > MAX_SNAPSHOT_CHARS ? `${tree.slice(0, MAX_SNAPSHOT_CHARS)}\n[... ${tree.length - MAX_SNAPSHOT_CHARS} more characters cut]` : tree;
    return `${untrustedHeader(page.url())}\nTitle: ${title}\n${cut}\n`;
  }

  private async locate(page: Page, ref: string): Promise<Locator> {
    const stale = () => new ClawError('usage', `ref ${ref} is not on the page any more`, { suggestion: 'take a new snapshot (browser snapshot)' });
    if (!this.refs.get(page)?.has(ref)) throw stale();
    const locator = page.getByRef(ref);
    if ((await locator.count()) === 0) throw stale();
    return locator;
  }

  /** What an action says: itself, and where the page is now. */
  private async after(page: Page, done: string): Promise<BrowserReply> {
    await page.waitForLoadState('domcontentloaded', { timeout: this.navigationTimeoutMs() }).catch(() => {});
    const title = await page.title().catch(() => '');
    return { text: `${done} Now at ${page.url()}${title ? ` (${JSON.stringify(title)})` : ''}. Take a snapshot (browser snapshot) to read it and find the refs to act on.` };
  }

  private async tabs(select: number | undefined): Promise<string> {
    const context = await this.start();
    const pages = context.pages();
    if (select !== undefined) {
      const page = pages[select];
      if (!page) throw new ClawError('usage', `there is no tab ${select}`, { suggestion: `choose one of 0..${pages.length - 1} (browser tabs)` });
      this.current = page;
      await page.bringToFront();
    }
    const lines = await Promise.all(pages.map(async (page, index) => `${page === this.current ? '*' : ' '} ${index} ${page.url()} ${JSON.stringify(await page.title().catch(() => ''))}`));
    return `${lines.join('\n')}\n`;
  }
}

function firstLine(error: unknown): string {
  return String((error as Error).message ?? error).split('\n')[0]!;
}
