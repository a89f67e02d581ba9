import { Option, type Command } from 'commander';
import { createProgram, nonNegativeInt, positiveInt, withExamples, jsonOption } from '../core/cli.js';

// Flags are parsed here; the work is in commands.ts, imported only when a command runs so that
// `thread --help` loads neither SQLite nor zod.
const commands = () => import('./commands.js');
const threadOption = () => new Option('--thread <path>', 'thread directory').makeOptionMandatory();

/** The `thread` CLI's definition; `cmds` reads it too, so it is built without running. */
export function createThreadProgram(): Command {
  const program = createProgram('thread', 'Durable event streams: push, pop, peek, ack and subscribe to events in a thread directory.')
    .version('0.1.0')
    .addHelpText(
      'after',
      `
A thread is a directory (events.db in SQLite WAL mode, events.jsonl, logs/). Consumers read it
from their own stored progress; subscribed consumers get their handler started by notifier when
matching events are pending. Environment: THECLAW_HOME (default ~/.theclaw).
With THECLAW_DATABASE_URL (or store: in $THECLAW_HOME/config.yaml) set to a postgres:// URL, the
threads are rows of that database instead, each named by its path relative to THECLAW_HOME.`,
    );
  withExamples(program, ['thread init ./demo', `thread push --thread ./demo --source self --type message --content '{"text":"hi"}'`, 'thread pop --thread ./demo --consumer worker']);

  withExamples(
    program
      .command('init')
      .description('create a thread directory (exit 1 if it is already a thread)')
      .argument('<path>', 'directory to create')
      .addOption(jsonOption())
      .action(async (path: string, options: { json?: boolean }) => (await commands()).init(path, options)),
    ['thread init ./demo'],
  );

  withExamples(
    program
      .command('push')
      .description('append one event (--content) or many (--batch, NDJSON on stdin); prints the new id(s)')
      .addOption(threadOption())
      .option('--source <address>', 'source address, e.g. self or external:webchat:main:dm:<id>:<id>')
      .option('--type <type>', 'event type: message or record')
      .option('--subtype <subtype>', 'record subtype: toolcall, decision, error, usage, compaction, ...')
      .addOption(new Option('--content <text>', 'event content (JSON text for messages)').conflicts('batch'))
      .option('--batch', 'read events from stdin, one JSON object per line: {"source","type","subtype","content","idempotency_key"}; flags give defaults')
      .option('--idempotency-key <key>', 'a repeated push with the same key stores nothing and prints the first id')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).push(options)),
    [
      `thread push --thread ./demo --source self --type message --content '{"text":"hi"}'`,
      `printf '%s\\n' '{"content":"a"}' '{"content":"b"}' | thread push --thread ./demo --source self --type message --batch`,
    ],
  );

  withExamples(
    program
      .command('pop')
      .description("read a consumer's next events (NDJSON); --last-event-id acknowledges that id first")
      .addOption(threadOption())
      .requiredOption('--consumer <name>', 'consumer name')
      .option('--last-event-id <id>', 'acknowledge this id first (progress never moves back)', nonNegativeInt('--last-event-id'))
      .option('--limit <n>', 'most events returned (default 100)', positiveInt('--limit'))
      .addOption(jsonOption())
      .action(async (options) => (await commands()).pop(options)),
    ['thread pop --thread ./demo --consumer worker', 'thread pop --thread ./demo --consumer worker --last-event-id 3 --limit 10'],
  );

  withExamples(
    program
      .command('ack')
      .description("move a consumer's progress forward to an event id")
      .addOption(threadOption())
      .requiredOption('--consumer <name>', 'consumer name')
      .requiredOption('--event-id <id>', 'last event id handled', nonNegativeInt('--event-id'))
      .addOption(jsonOption())
      .action(async (options) => (await commands()).ack(options)),
    ['thread ack --thread ./demo --consumer worker --event-id 4'],
  );

  withExamples(
    program
      .command('peek')
      .description('read events without consuming them (NDJSON, oldest first)')
      .addOption(threadOption())
      .option('--last-event-id <id>', 'only events after this id', nonNegativeInt('--last-event-id'))
      .option('--limit <n>', 'most events returned (default 100)', positiveInt('--limit'))
      .option('--filter <expr>', "e.g. \"type = 'message' AND source LIKE 'external:%'\"")
      .addOption(new Option('--last <k>', 'the newest k matching events').argParser(positiveInt('--last')).conflicts('limit'))
      .addOption(jsonOption())
      .addHelpText(
        'after',
        `
Filter language: fields id source type subtype created_at; operators = != <> < <= > >= LIKE GLOB
IN (...) IS [NOT] NULL NOT AND OR ( ); 'single-quoted' strings and numbers.`,
      )
      .action(async (options) => (await commands()).peek(options)),
    [`thread peek --thread ./demo --last 10 --filter "type = 'message' AND source LIKE 'external:%'"`],
  );

  withExamples(
    program
      .command('subscribe')
      .description('register a consumer whose handler notifier starts when matching events are pending')
      .addOption(threadOption())
      .requiredOption('--consumer <name>', 'consumer name (its progress is kept across unsubscribe/subscribe)')
      .requiredOption('--handler <command>', 'command to run, split with shell-words rules and run without a shell')
      .option('--filter <expr>', 'only events matching this filter count, e.g. "type = \'message\'"')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).subscribe(options)),
    [`thread subscribe --thread ./demo --consumer worker --handler "my-handler --verbose" --filter "type = 'message'"`],
  );

  withExamples(
    program
      .command('unsubscribe')
      .description('end a subscription; progress is kept so subscribe resumes where it stopped')
      .addOption(threadOption())
      .requiredOption('--consumer <name>', 'consumer name')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).unsubscribe(options)),
    ['thread unsubscribe --thread ./demo --consumer worker'],
  );

  withExamples(
    program
      .command('info')
      .description('events, consumers, progress, pending counts, leases and failures')
      .addOption(threadOption())
      .addOption(jsonOption())
      .action(async (options) => (await commands()).info(options)),
    ['thread info --thread ./demo --json'],
  );

  withExamples(
    program
      .command('dispatch')
      .description('start the handlers that have pending events now (notifier does this by itself)')
      .addOption(threadOption())
      .addOption(jsonOption())
      .action(async (options) => (await commands()).dispatch(options)),
    ['thread dispatch --thread ./demo'],
  );
  withExamples(
    program
      .command('migrate')
      .description("copy every thread of the home's store into another (a postgres:// URL, or a home's SQLite files), then compare counts and hashes")
      .requiredOption('--to <url|home>', 'where to copy: postgres://user@host:5432/db, or the path of a home (created if missing)')
      .option('--from <url|home>', 'where to copy from (default: the store THECLAW_DATABASE_URL or config.yaml names, else the home)')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).migrate(options)),
    ['thread migrate --to postgres://theclaw@db.example:5432/theclaw', 'thread migrate --from postgres://theclaw@db.example:5432/theclaw --to ~/.theclaw-back'],
  );
  return program;
}
