import { Option, type Command } from 'commander';
import { createProgram, positiveInt, jsonOption, withExamples } from '../core/cli.js';

const commands = () => import('./commands.js');
const taskCommands = () => import('./task-commands.js');

/** The `agent` CLI's definition; `cmds` reads it too, so it is built without running. */
export function createAgentProgram(): Command {
  const program = createProgram('agent', 'The agent runtime: create, start and stop agents; notifier runs their batches and deliveries.')
    .version('0.1.0')
    .addHelpText(
      'after',
      `
An agent is a directory, $THECLAW_HOME/agents/<id>/: IDENTITY.md (its system prompt), USAGE.md
(how others use it), config.yaml, inbox/ (a thread), threads/, sessions/, memory/, workdir/, logs/.
It is not a process: once started, notifier runs \`agent run <id>\` when its inbox has messages and
\`agent deliver\` when a conversation has replies to send.

In any chat, /new, /reset, /stop, /status, /usage, /tasks and /help are answered by the runtime
without the model (/help lists what they do); any other /word goes to the model as text.`,
    );
  withExamples(program, ['agent init helper', 'agent start helper', 'agent chat helper', 'agent status --json']);

  withExamples(
    program
      .command('init')
      .description("create an agent directory with IDENTITY.md, USAGE.md, config.yaml and its inbox (exit 1 if it exists, or if its model's window cannot hold its identity and memory caps)")
      .argument('<id>', 'agent id: lower-case letters, digits, _ and -')
      .addOption(new Option('--kind <kind>', 'system or user (default: system for admin, warden, maintainer, evolver)').choices(['system', 'user']))
      .option('--provider <name>', "LLM provider (default: pai's default)")
      .option('--model <id>', 'model id')
      .addOption(jsonOption())
      .action(async (id: string, options) => (await commands()).init(id, options)),
    ['agent init helper', 'agent init writer --provider openai --model gpt-4o-mini'],
  );
  withExamples(
    program
      .command('start')
      .description('subscribe the inbox: notifier runs the agent when messages arrive')
      .argument('<id>')
      .addOption(jsonOption())
      .action(async (id: string, options) => (await commands()).start(id, options)),
    ['agent start helper'],
  );
  withExamples(
    program
      .command('stop')
      .description('unsubscribe the inbox; messages wait and are handled after start')
      .argument('<id>')
      .addOption(jsonOption())
      .action(async (id: string, options) => (await commands()).stop(id, options)),
    ['agent stop helper'],
  );
  withExamples(
    program
      .command('status')
      .description('started, pending, running, last activity, model, threads, undelivered')
      .argument('[id]')
      .addOption(jsonOption())
      .action(async (id: string | undefined, options) => (await commands()).status(id, options)),
    ['agent status', 'agent status admin --json'],
  );
  withExamples(
    program
      .command('list')
      .description('every agent')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).list(options)),
    ['agent list --json'],
  );
  withExamples(
    program
      .command('send')
      .description("put a message into an agent's inbox (from the terminal or another agent)")
      .argument('<id>')
      .requiredOption('--text <text>', 'the message')
      .option('--source <address>', 'sender address (default: you on the terminal channel, or the calling agent)')
      .option('--idempotency-key <key>', 'a repeated send with the same key is stored once')
      .addOption(jsonOption())
      .action(async (id: string, options) => (await commands()).send(id, options)),
    ['agent send helper --text "summarise today\'s mail"'],
  );
  const config = program.command('config').description("an agent's config.yaml");
  withExamples(
    config
      .command('set')
      .description('set one key of the config (a dotted path; the value is read as YAML); the whole config is checked first, and a change it refuses is not written')
      .argument('<id>')
      .argument('<key>', 'e.g. pai.model, context.recent_messages')
      .argument('<value>', 'e.g. gpt-4o-mini, 40, true, [openai/gpt-4o-mini]')
      .addOption(jsonOption())
      .action(async (id: string, key: string, value: string, options) => (await commands()).configSet(id, key, value, options)),
    ['agent config set helper pai.model gpt-4o-mini', 'agent config set helper context.recent_messages 40'],
  );
  const identity = program.command('identity').description("an agent's IDENTITY.md and linked people");
  withExamples(
    identity
      .command('set')
      .description("replace IDENTITY.md (refused if the agent's model has no room for it)")
      .argument('<id>')
      .option('--text <text>', 'the new identity (default: stdin)')
      .addOption(jsonOption())
      .action(async (id: string, options) => (await commands()).identitySet(id, options)),
    ['agent identity set helper --text "I am helper: I keep the garden notes."', 'cat identity.md | agent identity set helper'],
  );
  withExamples(
    identity
      .command('link')
      .description('make addresses one person: one memory file, owner if one is')
      .argument('<id>')
      .argument('<name>', 'the person, e.g. alice')
      .argument('<address...>', '<channel type>:<instance>:<peer id>')
      .addOption(jsonOption())
      .action(async (id: string, name: string, addresses: string[], options) => (await commands()).identityLink(id, name, addresses, options)),
    ['agent identity link admin alice telegram:main:123456 webchat:main:3f2a9c'],
  );
  withExamples(
    identity
      .command('unlink')
      .description('unlink addresses (none: the person)')
      .argument('<id>')
      .argument('<name>')
      .argument('[address...]')
      .addOption(jsonOption())
      .action(async (id: string, name: string, addresses: string[], options) => (await commands()).identityUnlink(id, name, addresses, options)),
    ['agent identity unlink admin alice webchat:main:3f2a9c'],
  );
  withExamples(
    identity
      .command('list')
      .description('the linked people')
      .argument('<id>')
      .addOption(jsonOption())
      .action(async (id: string, options) => (await commands()).identityList(id, options)),
    ['agent identity list admin'],
  );
  withExamples(
    program
      .command('delegate')
      .description('start a background task; its result comes back to this conversation')
      .argument('<agent>', 'the agent that does it, or self')
      .requiredOption('--task <text>', 'what to do')
      .option('--label <label>', 'a short name, shown in /tasks')
      .addOption(jsonOption())
      .action(async (agent: string, options) => (await taskCommands()).delegate(agent, options)),
    ['agent delegate helper --task "research flights to Lisbon in May" --label flights', 'agent delegate self --task "summarise the long report in workdir/report.md"'],
  );
  withExamples(
    program
      .command('tasks')
      .description("an agent's background tasks, running and recent; --stop ends one")
      .argument('<agent>')
      .option('--stop <task>', 'stop this task')
      .addOption(new Option('--expire <task>', 'end the task as timed out (its timer runs this)').hideHelp())
      .addOption(jsonOption())
      .action(async (agent: string, options) => (await taskCommands()).tasks(agent, options)),
    ['agent tasks admin', 'agent tasks admin --stop t-1a2b3c4d'],
  );
  const memory = program.command('memory').description("an agent's memory: search it, show it, edit it");
  withExamples(
    memory
      .command('search')
      .description(
        "search the agent's memory files (with their daily notes and archived versions) and conversations (SQLite FTS5, BM25; with memory.embeddings in its config, by meaning too): in a turn, what its conversation may see (the agent's memory, this person's or group's, this conversation's); else the agent's memory, one conversation's (--peer) or everything (--all)",
      )
      .argument('<agent>')
      .argument('<query>', 'words to look for (any of them; the more and the rarer, the better)')
      .option('--peer <conversation>', 'search as this conversation sees (a thread id, e.g. peer-telegram.main.5151)')
      .option('--all', 'every memory file and conversation (the owner, not in a turn)')
      .option('--limit <n>', 'hits to print', positiveInt('--limit'), 5)
      .addOption(jsonOption())
      .action(async (agent: string, query: string, options) => (await commands()).memorySearch(agent, query, options)),
    ['agent memory search admin "sister Lisbon"', 'agent memory search admin "dentist" --peer peer-telegram.main.5151 --json'],
  );
  withExamples(
    memory
      .command('show')
      .description("print the agent's memory files: its own, and with --peer a conversation's (the person's or group's, the conversation summary)")
      .argument('<agent>')
      .option('--peer <conversation>', 'also what this conversation sees (a thread id)')
      .action(async (agent: string, options) => (await commands()).memoryShow(agent, options)),
    ['agent memory show admin', 'agent memory show admin --peer peer-webchat.main.3f2a'],
  );
  withExamples(
    memory
      .command('edit')
      .description("open a memory file in $EDITOR: the agent's own, or --file one of its memory files (memory/user-....md)")
      .argument('<agent>')
      .option('--file <path>', "a file under the agent's memory/ (default: memory/agent.md)")
      .action(async (agent: string, options) => (await commands()).memoryEdit(agent, options)),
    ['agent memory edit admin', 'agent memory edit admin --file memory/user-telegram.main.5151.md'],
  );
  withExamples(
    program
      .command('attach')
      .description("send a file with this turn's answer (run by the agent; the file must be in its directory, e.g. its workdir)")
      .argument('<file>')
      .option('--name <name>', 'the name the person sees (default: the file name)')
      .addOption(jsonOption())
      .action(async (file: string, options) => (await commands()).attach(file, options)),
    ['agent attach report.pdf', 'agent attach chart.png --name "sales by month.png"'],
  );
  withExamples(
    program
      .command('chat')
      .description('talk to an agent from this terminal')
      .argument('<id>')
      .addHelpText(
        'after',
        `
At a terminal, lines can be edited and recalled (arrow keys). /quit, /exit or Ctrl-D leaves, once the
answers to what was sent came (or 120 s passed). /new, /reset, /stop, /status, /usage and /help are
answered by the runtime. An answer that came while no chat was open is shown first, with what it answers.
The agent's commands are shown as they run, on stderr.`,
      )
      .action(async (id: string) => (await commands()).chat(id)),
    ['agent chat admin'],
  );
  withExamples(
    program
      .command('approvals')
      .description("what waits for the owner's decision: commands (policy ask) and proposed changes (the evolver's)")
      .argument('<id>')
      .addOption(jsonOption())
      .action(async (id: string, options) => (await commands()).approvals(id, options)),
    ['agent approvals helper'],
  );
  for (const [verb, what] of [
    ['approve', 'let a command that waits for approval run, or apply a proposed change (the file as it was is kept)'],
    ['deny', 'refuse a command that waits for approval, or drop a proposed change'],
  ] as const) {
    withExamples(
      program
        .command(verb)
        .description(what)
        .argument('<id>')
        .argument('<code>', 'the code in the request or the proposal')
        .addOption(jsonOption())
        .action(async (id: string, code: string, options) => (await commands()).decide(id, code, verb === 'approve', options)),
      [`agent ${verb} helper k3x9p`],
    );
  }
  withExamples(
    program
      .command('heartbeat')
      .description(
        "show, set or remove the agent's heartbeat: a turn of its own every so often that tells the owner, in their direct chat with it, what needs them, and sends nothing when nothing does (HEARTBEAT_OK); skipped while the agent is stopped, over its budget or outside its active hours",
      )
      .argument('<id>')
      .option('--every <duration>', 'how often: 30m, 1h, 2h30m (at least 1m); sets the heartbeat')
      .option('--prompt <text>', 'the checklist it goes through (default: whether anything needs the owner now)')
      .option('--model <provider/model>', "a cheaper model for heartbeats (default: the agent's)")
      .option('--active-hours <HH:MM-HH:MM>', "beat only within these hours, this machine's local time (e.g. 08:00-22:00)")
      .option('--off', 'remove the heartbeat and its timer')
      .option('--now', 'run one heartbeat now (what its timer runs)')
      .addOption(jsonOption())
      .addHelpText(
        'after',
        `
Stored under heartbeat: in the agent's config.yaml, and run by the notifier timer hb-<id>, which
agent start and theclaw up set again from the config when it is missing. A heartbeat runs in its
own thread (threads/heartbeat/), with a small prompt: the head of IDENTITY.md and the checklist,
no person's memory, no conversation. Its commands follow the policy of the owner's direct chat.`,
      )
      .action(async (id: string, options) => (await commands()).heartbeat(id, options)),
    [
      'agent heartbeat admin --every 30m --prompt "check ~/inbox.txt for anything urgent"',
      'agent heartbeat admin --model openai/gpt-4o-mini --active-hours 08:00-22:00',
      'agent heartbeat admin',
      'agent heartbeat admin --off',
    ],
  );
  withExamples(
    program
      .command('run')
      .description('one batch of inbox messages (notifier runs it)')
      .argument('<id>')
      .addOption(jsonOption())
      .action(async (id: string, options) => (await commands()).run(id, options)),
    ['agent run helper'],
  );
  withExamples(
    program
      .command('deliver')
      .description("deliver a thread's replies (notifier runs it)")
      .option('--thread <path>', 'conversation thread (default: $THECLAW_THREAD, which notifier sets)')
      .requiredOption('--consumer <name>', 'consumer (outbound)')
      .option('--max-attempts <n>', 'deliver.max_attempts of an agent whose directory is on another host (agent start writes it into the handler)', positiveInt('--max-attempts'))
      .addOption(jsonOption())
      .action(async (options) => (await commands()).deliver(options)),
    ['agent deliver --thread ~/.theclaw/agents/helper/threads/peers/webchat.main.b7c1 --consumer outbound'],
  );
  withExamples(
    program
      .command('move')
      .description('move an agent to another host of the PostgreSQL store')
      .argument('<id>')
      .requiredOption('--to <host>', 'the target host (THECLAW_HOST there)')
      .option('--copied', 'copied by hand already (stopped for the copy): switch the placement and start it there')
      .addOption(jsonOption())
      .action(async (id: string, options) => (await import('./move.js')).moveCommand(id, options)),
    ['agent move helper --to host-b'],
  );
  return program;
}
