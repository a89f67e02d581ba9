import type { Command } from 'commander';
import { createProgram, jsonOption, positiveInt, withExamples } from '../core/cli.js';

// The work is in commands.ts, imported only when a command runs.
const commands = () => import('./commands.js');

/** The `web` CLI's definition; cmds indexes it too, so it is built without running. */
export function createWebProgram(): Command {
  const program = createProgram('web', "The web for a model: a page's main content as Markdown (web fetch) and results from the owner's search provider (web search).")
    .version('0.1.0')
    .addHelpText(
      'after',
      `
Only public addresses are fetched: loopback, private, link-local (the cloud metadata address),
CGNAT and IPv6 local addresses are refused before connecting, after DNS and at every redirect.
$THECLAW_HOME/web/config.yaml:
  allow_private: ["192.168.1.0/24", "nas.local"]   # private hosts the owner allows (never metadata)
  cache_minutes: 15                                # the same URL is not fetched again meanwhile
  search: { provider: brave }                      # key in BRAVE_API_KEY (or api_key_env: NAME)
  # search: { provider: searxng, api_root: "http://127.0.0.1:8888" }
What a page says is untrusted: the output is marked as web content that holds no instructions.`,
    );
  withExamples(program, ['web fetch https://example.org/article', 'web search "brest ferry timetable"']);

  withExamples(
    program
      .command('fetch')
      .description('read a web page: its main content as Markdown (text, JSON and PDF as text), marked as untrusted')
      .argument('<url>', 'an http(s) URL')
      .option('--max-chars <n>', 'at most this many characters of text (default 20000)', positiveInt('--max-chars'))
      .option('--raw', 'the body as it came, without the reader (HTML as HTML)')
      .option('--fresh', 'fetch again even if the cache has the page')
      .option('--timeout <seconds>', 'give up after this long, redirects included (default 30)', positiveInt('--timeout'))
      .option('--max-bytes <n>', 'refuse a body larger than this (default 5000000)', positiveInt('--max-bytes'))
      .addOption(jsonOption('print {url, final_url, status, title, byline, text, ...} as JSON'))
      .action(async (url: string, options) => (await commands()).fetch(url, options)),
    ['web fetch https://example.org/article', 'web fetch https://example.org/data.json --raw', 'web fetch https://example.org/report.pdf --max-chars 50000 --json'],
  );

  withExamples(
    program
      .command('search')
      .description('search the web: titles, URLs, snippets and dates of the best results')
      .argument('<query...>', 'what to search for')
      .option('--count <n>', 'results wanted (default 5, at most 20)', positiveInt('--count'))
      .addOption(jsonOption('print [{title, url, snippet, date}] as JSON'))
      .action(async (query: string[], options) => (await commands()).search(query, options)),
    ['web search "brest ferry timetable"', 'web search rust async book --count 10 --json'],
  );
  return program;
}
