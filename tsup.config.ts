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
    esbuildPlugins: [noStyleSheets, yamlBuiltins],
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
