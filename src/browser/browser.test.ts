import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { daemonHolder } from '../core/daemon.js';
import { hasChromium } from '../testing/browser.js';
import { startFormSite, type FormSite } from '../testing/form-site.js';
import { createTestHome, expectRefused, runTool, waitFor, type TestHome } from '../testing/index.js';
import { browserMemoryBytes } from './memory.js';
import { browserProfileDir } from './limits.js';

// The real service (started by the first command) driving Debian's chromium, against a loopback
// site that web/config.yaml allows (127.0.0.1 only: 127.0.0.2 stands for the owner's network).
let site: FormSite;
let test: TestHome;

const browser = (...args: string[]) => runTool('browser', args, test.env);

async function ok(...args: string[]): Promise<string> {
  const result = await browser(...args);
  expect(result.code, `browser ${args.join(' ')}: ${result.stderr}`).toBe(0);
  return result.stdout;
}

/** The ref the snapshot gives the element whose line matches `line`. */
function refOf(snapshot: string, line: RegExp): string {
  const found = snapshot.split('\n').find((text) => line.test(text));
  const ref = found && /\[ref=((?:f\d+)?e\d+)\]/.exec(found)?.[1];
  if (!ref) throw new Error(`no ref for ${line} in:\n${snapshot}`);
  return ref;
}

/** The pid of the browser's main process: the one with its profile and no `--type` (a renderer's, the GPU's). */
function browserMainProcess(profileDir: string): number {
  const main = readdirSync('/proc').find((pid) => {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return args.includes(`--user-data-dir=${profileDir}`) && !args.some((arg) => arg.startsWith('--type='));
    } catch {
      return false; // not a process, or gone meanwhile
    }
  });
  if (!main) throw new Error(`no browser runs with the profile ${profileDir}`);
  return Number(main);
}

describe.skipIf(!hasChromium)('browser', { timeout: 120_000 }, () => {
  beforeAll(async () => {
    site = await startFormSite();
    test = createTestHome();
    mkdirSync(join(test.home, 'web'), { recursive: true });
    writeFileSync(join(test.home, 'web', 'config.yaml'), 'allow_private: ["127.0.0.1"]\n');
    mkdirSync(join(test.home, 'agents', 'admin'), { recursive: true });
    writeFileSync(join(test.home, 'agents', 'admin', 'config.yaml'), '{}\n');
  });
  afterAll(async () => {
    await browser('stop');
    await site.close();
    test.cleanup();
  });

  it('opens a page and snapshots it as an untrusted tree whose elements carry refs', async () => {
    expect(await ok('open', site.url('/form'))).toContain(`Opened ${site.url('/form')}`);
    const snapshot = await ok('snapshot');
    expect(snapshot).toMatch(/^\[web content from http:\/\/127\.0\.0\.1:\d+\/form: untrusted text/);
    expect(snapshot).toContain('Title: Ferry booking');
    expect(snapshot).toMatch(/heading "Book a crossing" \[level=1\] \[ref=(f\d+)?e\d+\]/);
    expect(snapshot).toMatch(/textbox "Your name" \[ref=(f\d+)?e\d+\]/);
    expect(snapshot).toMatch(/button "Book" \[ref=(f\d+)?e\d+\]/);
    // The browser itself was started, not Debian's launcher script (a shell and a dozen processes
    // at each start), which would have given it Google's API keys in its environment.
    const main = browserMainProcess(browserProfileDir(test.home, 'admin'));
    expect(readFileSync(`/proc/${main}/environ`, 'latin1').split('\0')).not.toContainEqual(expect.stringMatching(/^(CHROME_WRAPPER|GOOGLE_API_KEY)=/));
  });

  it('fills a form, chooses an option and submits it: the site receives the POST', async () => {
    await ok('open', site.url('/form'));
    const snapshot = await ok('snapshot');
    await ok('type', refOf(snapshot, /textbox "Your name"/), 'Anne Marin');
    await ok('select', refOf(snapshot, /combobox "Slot"/), '07:45');
    expect(await ok('click', refOf(snapshot, /button "Book"/))).toContain(`Now at ${site.url('/book')} ("Booked")`);
    expect(site.posts.at(-1)).toEqual({ name: 'Anne Marin', slot: '07:45' });
    expect(await ok('snapshot')).toContain('Booked Anne Marin at 07:45');
  });

  it('refuses a ref of an earlier page, and one never given, saying to take a new snapshot', async () => {
    await ok('open', site.url('/form'));
    const button = refOf(await ok('snapshot'), /button "Book"/);
    await ok('open', site.url('/other'));
    expectRefused(await browser('click', button), 2, new RegExp(`^Error: ref ${button} is not on the page any more - take a new snapshot \\(browser snapshot\\)$`, 'm'));
    await ok('snapshot');
    expectRefused(await browser('click', 'e999'), 2, /ref e999 is not on the page any more/);
    expectRefused(await browser('click', 'button'), 2, /"button" is not a ref/);
  });

  it('never reaches an address the web guard refuses: neither a navigation nor what a page asks for', async () => {
    expectRefused(await browser('open', `${site.refusedOrigin}/`), 2, /refused to fetch from 127\.0\.0\.2:\d+: 127\.0\.0\.2 is a loopback address/);
    expectRefused(await browser('open', 'file:///etc/passwd'), 2, /file: URLs are not fetched/);
    await ok('open', site.url('/leak'));
    // The page's image, frame and fetch have all been tried once the page is idle.
    await ok('wait', '--ms', '500');
    expect(await ok('snapshot')).toContain('A page that asks the internal network');
    expect(site.refusedHits).toEqual([]);
  });

  it('takes a screenshot as a PNG in the current directory, saying how to send it', async () => {
    await ok('open', site.url('/form'));
    const out = join(test.home, 'shot.png');
    expect(await ok('screenshot', '--out', out)).toContain(`To send it with your answer: agent attach ${out}`);
    expect(readFileSync(out).subarray(1, 4).toString()).toBe('PNG');
  });

  it("keeps to the agent's limits: no tab past max_pages, and a navigation given up after navigation_timeout_seconds", async () => {
    writeFileSync(join(test.home, 'agents', 'admin', 'config.yaml'), 'browser: { max_pages: 1, navigation_timeout_seconds: 2 }\n');
    try {
      await ok('open', site.url('/form'));
      expectRefused(await browser('open', site.url('/other'), '--new-tab'), 2, /^Error: this browser has 1 tabs open, its limit - open the page in the current tab/m);
      const started = Date.now();
      expectRefused(await browser('open', site.url('/hang')), 1, /^Error: could not open http:\/\/127\.0\.0\.1:\d+\/hang: .*Timeout 2000ms exceeded/m);
      expect(Date.now() - started).toBeLessThan(60_000);
    } finally {
      writeFileSync(join(test.home, 'agents', 'admin', 'config.yaml'), '{}\n');
    }
  });

  it('restarts a browser over its memory cap, and its next command says so', async () => {
    writeFileSync(join(test.home, 'agents', 'admin', 'config.yaml'), 'browser: { max_memory_mb: 64 }\n');
    try {
      await ok('open', site.url('/form'));
      const service = daemonHolder(test.home, 'browser')!.pid;
      const profile = browserProfileDir(test.home, 'admin');
      // The service looks every 15 s; Chromium with a page is far over 64 MB.
      await waitFor(() => browserMemoryBytes(profile, service) === 0, 'the browser closed over its memory cap', 60_000);
      expect(await ok('open', site.url('/form'))).toMatch(/^\[The browser was restarted: it used \d+ MB, over its limit of 64 MB\. Its pages were closed\.\]\nOpened /);
    } finally {
      writeFileSync(join(test.home, 'agents', 'admin', 'config.yaml'), '{}\n');
    }
  });

  it('shows in theclaw status (agent, pages, memory) and is stopped by theclaw down', async () => {
    await ok('open', site.url('/form'));
    const status = await runTool('theclaw', ['status', '--json'], test.env);
    expect(JSON.parse(status.stdout).browser).toMatchObject({
      pid: daemonHolder(test.home, 'browser')!.pid,
      answering: true,
      browsers: [{ agent: 'admin', pages: 1, memory_bytes: expect.any(Number) }],
    });
    expect((await runTool('theclaw', ['status'], test.env)).stdout).toMatch(/^browser +running +pid \d+ .* 1 browser\(s\) open\n +admin +1 page\(s\) +\d+ MB$/m);
    const down = await runTool('theclaw', ['down'], test.env);
    expect(down.stdout).toBe('stopped browser\n');
    expect(daemonHolder(test.home, 'browser')).toBeNull();
  });

  it("closes the agent's browser after its idle time, and on browser close", async () => {
    // Read at each command: closed 1.2 s after this one.
    writeFileSync(join(test.home, 'agents', 'admin', 'config.yaml'), 'browser:\n  idle_minutes: 0.02\n');
    await ok('open', site.url('/form'));
    const service = daemonHolder(test.home, 'browser')!.pid;
    const profile = browserProfileDir(test.home, 'admin');
    expect(browserMemoryBytes(profile, service)).toBeGreaterThan(0);
    await waitFor(() => browserMemoryBytes(profile, service) === 0, 'the browser closed when idle', 30_000);
    writeFileSync(join(test.home, 'agents', 'admin', 'config.yaml'), '{}\n');
    await ok('open', site.url('/form'));
    expect(await ok('close')).toContain('Closed the browser');
    expect(browserMemoryBytes(profile, service)).toBe(0);
  });
});
