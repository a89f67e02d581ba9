import { Option, type Command } from 'commander';
import { createProgram, jsonOption, nonNegativeInt, withExamples } from '../core/cli.js';

const commands = () => import('./commands.js');

/** The `xgw` CLI's definition; `cmds` reads it too, so it is built without running. */
export function createXgwProgram(): Command {
  const program = createProgram('xgw', 'The gateway between chat channels (web chat, Telegram, Discord, Slack, terminal) and agents.')
    .version('0.1.0')
    .addHelpText(
      'after',
      `
Config: $THECLAW_HOME/xgw/config.yaml
  channels:
    - { id: webchat:main, type: webchat, port: 18790, access: open }
    - { id: terminal:local, type: terminal, access: open }
    - { id: telegram:main, type: telegram, token_env: TELEGRAM_BOT_TOKEN, access: pairing, allow: [] }
    - { id: discord:main, type: discord, token_env: DISCORD_BOT_TOKEN, access: pairing, allow: [] }
    - { id: slack:main, type: slack, token_env: SLACK_BOT_TOKEN, app_token_env: SLACK_APP_TOKEN, access: pairing }
    - { id: api:main, type: api, port: 18791, hooks: [{ name: ci, agent: admin, secret_env: CI_HOOK_SECRET }] }
  routes:
    - { channel: "*", peer: "*", agent: admin }
Access per channel: pairing (unknown peers get a one-time code: xgw pair approve <code>),
allowlist (only "allow" peers) or open. Everything listens on 127.0.0.1 only; the control
socket is $THECLAW_HOME/run/xgw.sock (mode 0600). Log: $THECLAW_HOME/logs/xgw.log.
Web chat: stream: false shows only the answer; show_tool_progress: true|false shows the
commands a turn runs ("running: ls -la") under the typing dots (default: on where access is open).
API: POST /v1/chat/completions (OpenAI's format; model = the agent, user = the conversation) with
a client's token from xgw token add; POST /hooks/<name> with the hook's secret.`,
    );
  withExamples(program, [
    'xgw start',
    'xgw status --json',
    'xgw channel add telegram:main --access pairing',
    'xgw route add --channel telegram:main --agent admin',
    'xgw send --channel telegram:main --peer 12345 --text "hello"',
    'xgw chat --agent admin',
  ]);

  withExamples(
    program
      .command('start')
      .description('start the gateway in the background (or in this process with --foreground)')
      .option('--foreground', 'run in this process until stopped')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).start(options)),
    ['xgw start'],
  );
  withExamples(
    program
      .command('stop')
      .description('stop the gateway')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).stop(options)),
    ['xgw stop'],
  );
  withExamples(
    program
      .command('reload')
      .description(
        'apply xgw/config.yaml to the running gateway: new channels start, removed ones stop, changed ones restart, routes and allowlists apply to the next message; the others keep running (a config with a problem is refused, and the running one kept)',
      )
      .addOption(jsonOption())
      .action(async (options) => (await commands()).reload(options)),
    ['xgw reload'],
  );
  withExamples(
    program
      .command('status')
      .description("each channel's state (web chat: its URL with the token), routes, waiting pairing requests")
      .addOption(jsonOption())
      .action(async (options) => (await commands()).status(options)),
    ['xgw status', 'xgw status --json'],
  );

  const config = program.command('config').description('the gateway configuration');
  withExamples(
    config
      .command('check')
      .description('validate the config and print every problem, without starting')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).configCheck(options)),
    ['xgw config check'],
  );

  const noReload = () => new Option('--no-reload', 'only write the file: the running gateway keeps its config until xgw reload');
  const channel = program.command('channel').description('the configured channels: add, list, remove (the change is applied to the running gateway)');
  withExamples(
    channel
      .command('add')
      .description(
        "add a channel to the config: its type is the id's prefix, unset settings take their defaults; a running gateway starts it (a change it refuses, e.g. a token variable its environment lacks, is not written)",
      )
      .argument('<id>', 'webchat:<name>, telegram:<name>, discord:<name>, slack:<name> or terminal:<name>')
      .option('--access <policy>', 'pairing (default), allowlist or open')
      .option('--allow <peer>', 'a peer id admitted without pairing (repeatable)', (peer: string, previous: string[] | undefined) => [...(previous ?? []), peer])
      .option('--port <n>', 'web chat: the port (default 18790; 0 picks a free one at each start)', nonNegativeInt('--port'))
      .option('--host <address>', 'web chat: a loopback address (default 127.0.0.1)')
      .option('--token-env <name>', 'Telegram, Discord, Slack: the variable that holds the bot token (default TELEGRAM_BOT_TOKEN, DISCORD_BOT_TOKEN, SLACK_BOT_TOKEN)')
      .option('--app-token-env <name>', 'Slack: the variable that holds the app-level token (default SLACK_APP_TOKEN)')
      .option('--api-root <url>', 'Telegram, Discord, Slack: the API root (for a test server)')
      .addOption(noReload())
      .addOption(jsonOption())
      .action(async (id: string, options) => (await commands()).channelAdd(id, options)),
    [
      'xgw channel add telegram:main --access pairing',
      'xgw channel add webchat:guests --port 18791 --access pairing',
      'xgw channel add discord:team --token-env TEAM_DISCORD_TOKEN --allow 123456789012345678',
    ],
  );
  withExamples(
    channel
      .command('list')
      .description('the channels in xgw/config.yaml, with their settings (xgw status shows their state)')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).channelList(options)),
    ['xgw channel list', 'xgw channel list --json'],
  );
  withExamples(
    channel
      .command('remove')
      .description('remove a channel from the config (refused while a route names it); a running gateway stops it')
      .argument('<id>', 'the channel id, as xgw channel list shows it')
      .addOption(noReload())
      .addOption(jsonOption())
      .action(async (id: string, options) => (await commands()).channelRemove(id, options)),
    ['xgw channel remove telegram:main'],
  );

  const route = program.command('route').description('which agent gets the messages of a channel and peer: add, list, remove (the change is applied to the running gateway)');
  withExamples(
    route
      .command('add')
      .description('route the messages of a channel and peer to an agent; an exact peer wins over *, then an exact channel over * (one route per channel and peer)')
      .requiredOption('--agent <id>', 'the agent')
      .option('--channel <id>', 'a configured channel id, or * for every channel', '*')
      .option('--peer <id>', 'a peer id, or * for every peer', '*')
      .addOption(noReload())
      .addOption(jsonOption())
      .action(async (options) => (await commands()).routeAdd(options)),
    ['xgw route add --channel telegram:main --agent helper', 'xgw route add --channel telegram:main --peer 12345 --agent admin'],
  );
  withExamples(
    route
      .command('list')
      .description('the routes in xgw/config.yaml, in order, with whether their agent exists')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).routeList(options)),
    ['xgw route list'],
  );
  withExamples(
    route
      .command('remove')
      .description('remove the route of a channel and peer')
      .option('--channel <id>', 'its channel, or *', '*')
      .option('--peer <id>', 'its peer, or *', '*')
      .addOption(noReload())
      .addOption(jsonOption())
      .action(async (options) => (await commands()).routeRemove(options)),
    ['xgw route remove --channel telegram:main', 'xgw route remove --channel telegram:main --peer 12345'],
  );

  withExamples(
    program
      .command('send')
      .description('deliver a reply through the running gateway (exit 0 delivered or duplicate, 1 failed, 2 usage)')
      .requiredOption('--channel <id>', 'channel id, e.g. telegram:main')
      .requiredOption('--peer <id>', 'peer id')
      .option('--conversation-type <type>', 'dm or group (default dm)')
      .option('--conversation <id>', 'conversation id (default: the peer id)')
      .option('--reply-to <message-id>', 'platform id of the message to quote')
      .option('--idempotency-key <key>', 'a key delivered before is acknowledged and not sent again')
      .addOption(new Option('--text <text>', 'the reply; or on stdin'))
      .addOption(jsonOption())
      .action(async (options) => (await commands()).send(options)),
    ['xgw send --channel telegram:main --peer 12345 --reply-to 678 --idempotency-key t1#42 --text "Done."', 'echo "hi" | xgw send --channel webchat:main --peer b7c1'],
  );

  const pair = program.command('pair').description('admit unknown peers by their pairing code');
  withExamples(
    pair
      .command('list')
      .description('pairing requests waiting for approval')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).pairList(options)),
    ['xgw pair list'],
  );
  withExamples(
    pair
      .command('approve')
      .description('admit the peer that was given this code')
      .argument('<code>', 'the 8-character code')
      .addOption(jsonOption())
      .action(async (code: string, options) => (await commands()).pairApprove(code, options)),
    ['xgw pair approve K7M2QX9P'],
  );

  const peer = program.command('peer').description('peers admitted by pairing');
  withExamples(
    peer
      .command('list')
      .description('admitted peers, per channel')
      .addOption(jsonOption())
      .action(async (options) => (await commands()).peerList(options)),
    ['xgw peer list'],
  );
  withExamples(
    peer
      .command('revoke')
      .description("take back a peer's admission (and any code it waits with): its messages get a new pairing code again")
      .argument('<channel>', 'channel id, e.g. telegram:main')
      .argument('<peer>', 'peer id, as xgw peer list shows it')
      .addOption(jsonOption())
      .action(async (channel: string, peerId: string, options) => (await commands()).peerRevoke(channel, peerId, options)),
    ['xgw peer revoke telegram:main 12345'],
  );

  const token = program.command('token').description("the API channel's clients and their bearer tokens (stored hashed)");
  const tokenCommands = () => import('./token-commands.js');
  withExamples(
    token
      .command('add')
      .description('create a client and print its token (shown once)')
      .argument('<name>', 'the client, e.g. ci: its peer id on api channels')
      .addOption(jsonOption())
      .action(async (name: string, options) => (await tokenCommands()).tokenAdd(name, options)),
    ['xgw token add ci'],
  );
  withExamples(
    token
      .command('list')
      .description('the clients (never their tokens)')
      .addOption(jsonOption())
      .action(async (options) => (await tokenCommands()).tokenList(options)),
    ['xgw token list'],
  );
  withExamples(
    token
      .command('revoke')
      .description("take back a client's token: it stops working at once")
      .argument('<name>', 'the client')
      .addOption(jsonOption())
      .action(async (name: string, options) => (await tokenCommands()).tokenRevoke(name, options)),
    ['xgw token revoke ci'],
  );

  withExamples(
    program
      .command('chat')
      .description('talk to an agent from this terminal, through the real pipeline')
      .option('--agent <id>', 'the agent (default: the routes decide)')
      .option('--channel <id>', 'terminal channel (default terminal:local)')
      .action(async (options) => (await commands()).chat(options)),
    ['xgw chat --agent admin'],
  );
  return program;
}
