import type { Command } from 'commander';
import { createProgram, jsonOption, positiveInt, withExamples } from '../core/cli.js';
import { usageError } from '../core/errors.js';

const commands = () => import('./commands.js');

function days(value: string): number {
  const match = /^(\d+)d?$/.exec(value.trim());
  if (!match || Number(match[1]) < 1) throw usageError(`--older-than ${JSON.stringify(value)} is not a number of days`, 'pass e.g. --older-than 30d');
  return Number(match[1]);
}

/** The `theclaw` CLI's definition; `cmds` reads it too, so it is built without running. */
export function createTheclawProgram(): Command {
  const program = createProgram('theclaw', 'The whole system in one command: start and stop it, see its state, check it, try it.')
    .version('0.1.0')
    .addHelpText(
      'after',
      `
theclaw up starts notifier (dispatch) and xgw (the gateway), creates and starts the system agents
(admin, warden, maintainer, evolver) with their timers (maintainer-sweep, warden-sweep,
evolver-daily), and routes the web chat and the terminal to admin. Everything
lives under $THECLAW_HOME (default ~/.theclaw). With no provider key the agents answer with the
offline mock model; theclaw setup chooses a real one (or set OPENAI_API_KEY or ANTHROPIC_API_KEY,
or a base_url in pai/config.yaml, before theclaw up).`,
    );
  withExamples(program, ['theclaw demo', 'theclaw setup', 'theclaw up', 'theclaw status', 'theclaw doctor', 'theclaw retry', 'theclaw down']);

  withExamples(
    program
      .command('setup')
      .description(
        'set TheClaw up without editing YAML: the model (its key checked, then kept in $THECLAW_HOME/secrets.env, 0600) and optionally Telegram and Discord (the first person to message the bot becomes its owner). With no flags on a terminal it asks; run again, it changes only what you give',
      )
      .option('--provider <name>', "the model's provider: openai, anthropic, openrouter, ollama, openai-compatible, mock")
      .option('--base-url <url>', "the server's URL up to /v1 (openai-compatible, ollama, or a proxy)")
      .option('--model <id>', "the default model (default: the provider's usual one)")
      .option('--api-key-stdin', 'read the API key from stdin (the first line)')
      .option('--telegram-token-stdin', 'read the Telegram bot token from stdin (the next line); the owner is who writes first')
      .option('--telegram-wait-seconds <n>', "how long to wait for the owner's message", positiveInt('--telegram-wait-seconds'), 300)
      .option('--telegram-api-root <url>', 'the Bot API root (a proxy)')
      .option('--discord-token-stdin', 'read the Discord bot token from stdin (the next line); the owner is who writes first')
      .option('--discord-wait-seconds <n>', "how long to wait for the owner's message", positiveInt('--discord-wait-seconds'), 300)
      .option('--discord-api-root <url>', "Discord's REST API root, without /v10 (a proxy)")
      .option('--yes', 'ask nothing: what no flag gives keeps its value')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).setup(options)),
    [
      'theclaw setup',
      'printf \'%s\\n\' "$KEY" | theclaw setup --provider openai --api-key-stdin',
      'theclaw setup --provider ollama --model llama3.2',
      'theclaw setup --provider openai-compatible --base-url http://127.0.0.1:8000/v1 --model qwen3',
      'printf \'%s\\n\' "$BOT_TOKEN" | theclaw setup --telegram-token-stdin',
      'printf \'%s\\n\' "$BOT_TOKEN" | theclaw setup --discord-token-stdin',
    ],
  );
  withExamples(
    program
      .command('up')
      .description("start notifier and xgw, create and start the system agents, register their timers (the maintainer's and the warden's sweeps, the evolver's reflection), and print where to talk")
      .addOption(jsonOption())
      .action(async (options) => (await commands()).up(options)),
    ['theclaw up', 'OPENAI_API_KEY=sk-... theclaw up'],
  );
  withExamples(
    program
      .command('down')
      .description('stop notifier and xgw; agents stay started and their messages wait for the next up')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).down(options)),
    ['theclaw down'],
  );
  withExamples(
    program
      .command('reload')
      .description(
        "apply changed config files to the running daemons without a restart: xgw's channels and routes (channels that did not change keep running), notifier's settings; a config with a problem is refused with the error its check gives, and that daemon runs on as it was. Agents read theirs at every run.",
      )
      .addOption(jsonOption())
      .action(async (options) => (await commands()).reload(options)),
    ['theclaw reload', 'theclaw reload --json'],
  );
  withExamples(
    program
      .command('status')
      .description('every component (running, pid, uptime, memory), every agent (pending, last activity, model), the delivery queues, messages waiting for the model and recent errors')
      .option('--recent <n>', "also the newest N events of every agent's threads, and model usage per agent per day (the status page's view)", positiveInt('--recent'))
      .addOption(jsonOption())
      .action(async (options) => (await commands()).status(options)),
    ['theclaw status', 'theclaw status --json', 'theclaw status --recent 5'],
  );
  withExamples(
    program
      .command('doctor')
      .description(
        "check Node, the data directory, configs, provider keys, agents' model windows, the sandbox (bubblewrap) of their commands, the model (one tiny real call), every channel (its state in xgw; while xgw is down, Telegram's getMe with the token), ports, stale locks, old pending events, messages waiting for the model and recent errors; say how to fix each problem (exit 1 on a failure)",
      )
      .option('--offline', "skip the calls to the model and to the channels' platforms")
      .addOption(jsonOption())
      .action(async (options) => (await commands()).doctor(options)),
    ['theclaw doctor', 'theclaw doctor --offline', 'theclaw doctor --json'],
  );
  withExamples(
    program
      .command('retry')
      .description(
        'run now what waits out a backoff after failing: messages waiting for the model (once it is back) and replies waiting for a channel; and send again the replies delivery gave up on (deliver.max_attempts); otherwise notifier retries them with backoff, up to backoff.max_seconds (5 minutes) apart',
      )
      .addOption(jsonOption())
      .action(async (options) => (await commands()).retry(options)),
    ['theclaw retry', 'theclaw retry --json'],
  );
  withExamples(
    program
      .command('prune')
      .description(
        'remove what is safe to remove, also while the daemons run: rotated logs beyond the newest few, xgw delivery keys of complete deliveries and read mailbox messages older than the cut-off, expired pairing codes, thread events every consumer has acknowledged (the newest 1,000 of each thread stay); then checkpoint and truncate every WAL; print what was freed',
      )
      .option('--older-than <days>', 'the cut-off in days (a number, or e.g. 30d)', days, 30)
      .option('--keep-logs <n>', 'rotated files kept of each log', positiveInt('--keep-logs'), 5)
      .option('--dry-run', 'say what would go, change nothing')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).prune(options)),
    ['theclaw prune --dry-run', 'theclaw prune --older-than 7d', 'theclaw prune --json'],
  );
  withExamples(
    program
      .command('logs')
      .description('the logs of notifier, xgw and every agent as one stream, merged by time, each line prefixed with its log')
      .argument('[component]', 'notifier, xgw or an agent id (default: all)')
      .option('-n, --lines <n>', 'entries to print', positiveInt('--lines'), 50)
      .option('--since <duration>', 'only entries newer than this: 30s, 10m, 2h, 7d')
      .option('-f, --follow', 'then print what the logs gain, until interrupted')
      .action(async (component: string | undefined, options) => (await commands()).logs(component, options)),
    ['theclaw logs', 'theclaw logs admin --since 1h', 'theclaw logs xgw -f'],
  );
  withExamples(
    program
      .command('maintain')
      .description(
        "the maintainer's sweep (theclaw up runs it every 30 s on the timer maintainer-sweep): read the agents' new errors, and tell the owner once per incident in their chat with admin, with what to do",
      )
      .addOption(jsonOption())
      .action(async (options) => (await commands()).maintain(options)),
    ['theclaw maintain', 'notifier timer list'],
  );
  withExamples(
    program
      .command('ward')
      .description(
        "the warden's sweep (theclaw up runs it every 30 s on the timer warden-sweep): review the commands the agents ran since the last sweep for dangerous patterns, and tell the owner of each in their chat with admin: the agent, the conversation, the command and why",
      )
      .addOption(jsonOption())
      .action(async (options) => (await commands()).ward(options)),
    ['theclaw ward', 'theclaw ward --json'],
  );
  withExamples(
    program
      .command('evolve')
      .description(
        "the evolver's daily reflection (theclaw up runs it at 22:00 on the timer evolver-daily): for each agent with messages since the last one, the model reads a digest of its day and may propose a new IDENTITY.md or memory/agent.md; the owner is told and decides with /approve or /deny (agent approvals lists what waits)",
      )
      .addOption(jsonOption())
      .action(async (options) => (await commands()).evolve(options)),
    ['theclaw evolve', 'agent approvals admin'],
  );
  const service = program.command('service').description('start the daemons with the system: systemd user units (Linux), launchd agents (macOS)');
  withExamples(
    service
      .command('install')
      .description(
        'write systemd user units for notifier and xgw (each in the foreground, started again after a crash, and at boot) and an env file for keys and tokens, and print the commands that enable them; on macOS print the launchd plists',
      )
      .addOption(jsonOption())
      .action(async (options) => (await commands()).serviceInstall(options)),
    ['theclaw service install'],
  );
  withExamples(
    service
      .command('uninstall')
      .description('remove the systemd user units (the env file stays) and print the commands that disable them')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).serviceUninstall(options)),
    ['theclaw service uninstall'],
  );
  withExamples(
    program
      .command('demo')
      .description('in a temporary home: start everything, send one message through the web chat, print the reply and the events it produced, stop')
      .option('--real', "use this environment's model (a provider key) instead of the scripted offline one")
      .option('--keep', 'keep the temporary home to look around in (its path is printed)')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).demo(options)),
    ['theclaw demo', 'theclaw demo --keep', 'OPENAI_API_KEY=sk-... theclaw demo --real'],
  );
  return program;
}
