import type { Command } from 'commander';
import { createProgram, withExamples, jsonOption } from '../core/cli.js';

const commands = () => import('./commands.js');

/** The `notifier` CLI's definition; `cmds` reads it too, so it is built without running. */
export function createNotifierProgram(): Command {
  const program = createProgram('notifier', 'The resident dispatcher: starts subscribed handlers when their threads have pending events, and runs timers.')
    .version('0.1.0')
    .addHelpText(
      'after',
      `
The daemon listens on a Unix socket under $THECLAW_HOME/run/ (mode 0600). Every thread push pokes
it; a periodic sweep finds what a lost poke or a restart would have stranded. Handlers run as argv
(no shell) with THECLAW_HOME, THECLAW_THREAD and THECLAW_CONSUMER set; a failing handler is retried
with exponential backoff. Log: $THECLAW_HOME/logs/notifier.log.
Config: $THECLAW_HOME/notifier/config.yaml (sweep_interval_seconds, handler_timeout_seconds,
backoff.initial_seconds, backoff.max_seconds, output_limit_bytes, max_concurrent_runs, runners);
notifier reload applies a change to the running daemon.`,
    );
  withExamples(program, ['notifier start', 'notifier status --json', 'notifier stop']);

  withExamples(
    program
      .command('start')
      .description('start the daemon in the background (or in this process with --foreground)')
      .option('--foreground', 'run in this process until stopped')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).start(options)),
    ['notifier start'],
  );

  withExamples(
    program
      .command('stop')
      .description('stop the daemon; running handlers finish their batch')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).stop(options)),
    ['notifier stop'],
  );

  withExamples(
    program
      .command('reload')
      .description(
        'apply notifier/config.yaml to the running daemon, without a restart: runs under way keep their limits, the next ones get the new (a config with a problem is refused, and the running one kept)',
      )
      .addOption(jsonOption())
      .action(async (options) => (await commands()).reload(options)),
    ['notifier reload'],
  );

  withExamples(
    program
      .command('status')
      .description('daemon state, every subscription (pending, running, failures) and the timers')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).status(options)),
    ['notifier status', 'notifier status --json'],
  );

  const timer = program.command('timer').description('run commands on a schedule (persisted across restarts)');

  withExamples(
    timer
      .command('add')
      .description(
        "add a timer: exactly one of --cron, --every, --at, --in. Run by an agent in a conversation's turn, it is a reminder: --message instead of --command, and when it fires the agent gets the message in that conversation's name (its policy applies there, and the answer goes there)",
      )
      .requiredOption('--id <id>', 'timer id (lower-case letters, digits, _ and -)')
      .option('--cron <expr>', "cron expression, e.g. '*/5 * * * *'")
      .option('--every <duration>', 'interval, e.g. 30s, 5m, 1h30m')
      .option('--at <time>', 'once, at an ISO-8601 time')
      .option('--in <duration>', 'once, this long from now, e.g. 10m, 2h')
      .option('--command <command>', "command to run, split with shell-words rules and run without a shell (not in an agent's turn)")
      .option('--message <text>', "in an agent's turn: what the agent is told when it fires")
      .addOption(jsonOption())
      .action(async (options) => (await commands()).timerAdd(options)),
    [
      'notifier timer add --id backup --every 6h --command "my-backup --quiet"',
      `notifier timer add --id morning --cron '0 8 * * *' --command "my-report"`,
      'notifier timer add --id stretch --in 1h --message "remind them to stretch"   # in an agent\'s turn',
    ],
  );

  withExamples(
    timer
      .command('list')
      .description('list timers with their next run')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).timerList(options)),
    ['notifier timer list --json'],
  );

  withExamples(
    timer
      .command('remove')
      .description('remove a timer')
      .requiredOption('--id <id>', 'timer id')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).timerRemove(options)),
    ['notifier timer remove --id backup'],
  );
  return program;
}
