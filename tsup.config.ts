import { readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { defineConfig, type Options } from 'tsup';

/**
 * linkedom parses a <style>'s CSS (with cssomnom, a third of the reader's code) only when a
 * script reads `.sheet`; `web fetch` never does (Readability and turndown drop style elements),
 * so the bundle gets a parse that says so instead, and the reader loads in half the time.
 */
const noStyleSheets: NonNullable<Options['esbuildPlugins']>[number] = {
  name: 'no-style-sheets',
  setup(build) {
    build.onResolve({ filter: /^cssomnom\/parse$/ }, () => ({ path: 'cssomnom-parse', namespace: 'no-style-sheets' }));
    build.onLoad({ filter: /.*/, namespace: 'no-style-sheets' }, () => ({
      contents: "export function parse() { throw new Error('style sheets are not parsed in this build (tsup.config.ts)'); }",
      loader: 'js',
    }));
  },
};

/**
 * Work the article reader's libraries do on every page that `web fetch` never uses, patched out of
 * the bundle (each patch names what it replaces, and the build fails when that is not there: an
 * upgrade is to be looked at again). Together a sixth of a warm read of the bench's 200 KB article:
 * - linkedom gives each node, as it is created, its own map of event listeners in a WeakMap: a
 *   Map and a weak entry per node, which the collector must trace, for listeners no page read
 *   here ever adds. The map is made when a first listener is added instead.
 * - Readability (0.6) writes four debug lines with the article serialised as HTML in them, and
 *   makes each line (the serialising) before its `log`, which drops it unless `debug` is on.
 * - turndown (7.2) asks of every element whether it is blank by testing its whole text, which
 *   is the page's text again for each element that holds the article; it now looks at its text
 *   nodes until one is not white space (the same answer: textContent is their text put together).
 */
/** Whether no text node below `root` holds more than white space: \`/^\\s*$/.test(root.textContent)\`, without making the text. */
const HAS_NO_TEXT = `function hasNoText(root) {
  var node = root.firstChild;
  while (node) {
    var type = node.nodeType;
    if ((type === 3 || type === 4) && /\\S/.test(node.nodeValue)) return false;
    if (type === 1 && node.firstChild) {
      node = node.firstChild;
      continue;
    }
    while (!node.nextSibling) {
      node = node.parentNode;
      if (node === root) return true;
    }
    node = node.nextSibling;
  }
  return true;
}`;

const READER_PATCHES: { file: RegExp; replace: [string | RegExp, string, number][] }[] = [
  {
    file: /\/linkedom\/esm\/interface\/event-target\.js$/,
    replace: [
      ['  constructor() {\n    wm.set(this, new Map);\n  }', '', 1],
      ['    const map = wm.get(this);\n    if (!map.has(type)) \n      map.set', '    let map = wm.get(this);\n    if (!map) wm.set(this, map = new Map);\n    if (!map.has(type)) \n      map.set', 1],
      ['    const map = wm.get(this);\n    if (map.has(type)) {', '    const map = wm.get(this);\n    if (map && map.has(type)) {', 1],
    ],
  },
  {
    file: /\/@mozilla\/readability\/Readability\.js$/,
    replace: [[/this\.log\(("[\w -]+: ") \+ articleContent\.innerHTML\)/g, 'this._debug && this.log($1 + articleContent.innerHTML)', 4]],
  },
  {
    file: /\/turndown\/lib\/turndown\.browser\.cjs\.js$/,
    replace: [
      ['/^\\s*$/i.test(node.textContent)', 'hasNoText(node)', 1],
      ['function isBlank(node) {', `${HAS_NO_TEXT}\nfunction isBlank(node) {`, 1],
    ],
  },
];

const readerPatches: NonNullable<Options['esbuildPlugins']>[number] = {
  name: 'reader-patches',
  setup(build) {
    for (const { file, replace } of READER_PATCHES) {
      build.onLoad({ filter: file }, ({ path }) => {
        let contents = readFileSync(path, 'utf8');
        for (const [from, to, times] of replace) {
          const found = typeof from === 'string' ? contents.split(from).length - 1 : (contents.match(from) ?? []).length;
          if (found !== times) throw new Error(`${path}: ${times} of ${String(from)} expected, ${found} found (tsup.config.ts READER_PATCHES)`);
          contents = typeof from === 'string' ? contents.replaceAll(from, to) : contents.replace(from, to);
        }
        return { contents, loader: 'js' };
      });
    }
  },
};

/**
 * yaml's CommonJS build requires Node's `process` and `buffer`, which an ES module bundle cannot
 * `require`: they become imports of the same modules.
 */
const yamlBuiltins: NonNullable<Options['esbuildPlugins']>[number] = {
  name: 'yaml-builtins',
  setup(build) {
    build.onResolve({ filter: /^[a-z_]+$/ }, (args) =>
      args.kind === 'require-call' && args.importer.includes('/node_modules/yaml/') && isBuiltin(args.path) ? { path: args.path, namespace: 'yaml-builtins' } : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'yaml-builtins' }, (args) => ({ contents: `export * from 'node:${args.path}';`, loader: 'js' }));
  },
};

// One entry per tool library and per CLI. Code splitting keeps shared modules in shared chunks,
// and each CLI loads its command modules lazily, so `thread push` never parses notifier code.
// The web pages' scripts are a second build, for the browser, into dist/page/ (which the first
// build's cleaning leaves alone: the two run at once).
export default defineConfig([
  {
    entry: {
      'core/index': 'src/core/index.ts',
      'thread/index': 'src/thread/index.ts',
      'thread/cli': 'src/thread/cli.ts',
      'notifier/index': 'src/notifier/index.ts',
      'notifier/cli': 'src/notifier/cli.ts',
      'notifier/runner': 'src/notifier/runner.ts',
      'notifier/reaper': 'src/notifier/reaper.ts',
      'pai/index': 'src/pai/index.ts',
      'pai/cli': 'src/pai/cli.ts',
      'xgw/index': 'src/xgw/index.ts',
      'xgw/cli': 'src/xgw/cli.ts',
      'agent/index': 'src/agent/index.ts',
      'agent/cli': 'src/agent/cli.ts',
      'cmds/index': 'src/cmds/index.ts',
      'cmds/cli': 'src/cmds/cli.ts',
      'web/index': 'src/web/index.ts',
      'web/cli': 'src/web/cli.ts',
      'browser/index': 'src/browser/index.ts',
      'browser/cli': 'src/browser/cli.ts',
      'theclaw/index': 'src/theclaw/index.ts',
      'theclaw/cli': 'src/theclaw/cli.ts',
      'theclaw/control-runner': 'src/theclaw/control-runner.ts',
    },
    format: ['esm'],
    // zod is bundled so that its unused parts are tree-shaken away; loading the package from
    // node_modules costs a CLI more start-up time than everything else it does.
    // pi-ai's OpenAI and Anthropic providers are bundled with their SDKs too (src/pai/pi.ts says why).
    // web fetch's reader too (a DOM, Readability, turndown): one chunk loads in a third of the
    // time of their hundreds of files (the bench's web fetch figure). yaml for preloadYaml's
    // import (src/core/config.ts): the rest of the code requires it from node_modules when used.
    noExternal: ['zod', '@mariozechner/pi-ai', 'openai', '@anthropic-ai/sdk', 'partial-json', 'linkedom', '@mozilla/readability', 'turndown', 'yaml'],
    esbuildPlugins: [noStyleSheets, yamlBuiltins, readerPatches],
    target: 'node20',
    platform: 'node',
    splitting: true,
    sourcemap: true,
    clean: ['!page/**'],
    dts: false,
  },
  {
    entry: { chat: 'src/xgw/page/chat.ts', status: 'src/xgw/page/status.ts', control: 'src/xgw/page/control.ts' },
    outDir: 'dist/page',
    format: ['iife'],
    platform: 'browser',
    target: ['chrome100', 'firefox100', 'safari15'],
    tsconfig: 'tsconfig.page.json',
    minify: true,
    clean: true,
    dts: false,
  },
]);
