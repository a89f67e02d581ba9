import { Option, type Command } from 'commander';
import { createProgram, positiveInt, withExamples, jsonOption } from '../core/cli.js';

const commands = () => import('./commands.js');
const json = () => jsonOption('machine-readable output (for chat: NDJSON events on stderr)');

/** The `pai` CLI's definition; `cmds` reads it too, so it is built without running. */
export function createPaiProgram(): Command {
  const program = createProgram('pai', 'The LLM client: providers, sessions, the bash_exec tool loop, retries, usage and cost.')
    .version('0.1.0')
    .addHelpText(
      'after',
      `
Providers: mock (offline, no key), openai, anthropic, google, mistral, groq, openrouter, xai,
deepseek, and any OpenAI- or Anthropic-compatible server (Ollama, vLLM, LM Studio) described in
$THECLAW_HOME/pai/config.yaml:
  default: local/qwen3:8b
  providers:
    local: { api: openai-completions, base_url: "http://127.0.0.1:11434/v1", models: [{ id: "qwen3:8b", context_window: 32768 }] }
  retry: { max_attempts: 3 }
Keys come from the providers' standard variables (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) or
api_key_env in the config; api_key_envs: [KEY_1, KEY_2] gives a provider several keys, used in
order: one refused (401/403) or rate limited (429) is set aside and the call goes on with the next.
With no default, pai uses the first server the config describes (api, base_url and models), else
the first provider whose key is set, else the offline mock.
Voice messages are transcribed with transcription: { model: openai/whisper-1 } (any provider
with an OpenAI-compatible /audio/transcriptions; none: they get a notice).
The offline mock echoes what it is told, or follows a script: PAI_MOCK_SCRIPT=<file>, or
mock: { script: <file> } in the config (relative to $THECLAW_HOME/pai/), a YAML list of steps:
  - { bash: "ls /tmp", comment: "look around" }   # a tool call (where tools are offered)
  - { text: "done" }                              # a reply
The n-th reply of a conversation is step n (counting the replies already in its history, tool
calls included), so a script goes on across turns and processes; /reset in a chat (or a new
--session) starts a conversation over, and with it the script. Past the last step it echoes.`,
    );
  withExamples(program, ['pai chat "hi"', 'pai chat --session ./s.jsonl --system "Be brief." "what is in /tmp?"', 'pai model resolve --json']);

  withExamples(
    program
      .command('chat')
      .description('one turn: send a message, run bash_exec rounds, print the reply (stdout holds the reply only)')
      .argument('[message]', 'the message; or --input-file, or stdin')
      .option('--session <file>', 'JSONL session: history read from it, the turn appended to it')
      .addOption(new Option('--system <text>', 'system prompt').conflicts('systemFile'))
      .option('--system-file <file>', 'system prompt from a file')
      .option('--provider <name>', 'provider (see pai model list)')
      .option('--model <id>', 'model id, or provider/model')
      .option('--input-file <file>', 'read the message from a file')
      .option('--stream', 'print the reply as it arrives')
      .option('--no-tools', 'do not offer bash_exec')
      .option('--max-turns <n>', 'tool rounds before the turn stops with a note (default 20)', positiveInt('--max-turns'))
      .option('--cwd <dir>', 'working directory of bash_exec')
      .addOption(json())
      .action(async (message: string | undefined, options) => (await commands()).chatCommand(message, options)),
    ['pai chat "hi"', 'echo "summarise this" | pai chat --provider openai --model gpt-4o-mini', 'pai chat --json --session s.jsonl "list my files"'],
  );

  const model = program.command('model').description('providers and models');
  withExamples(
    model
      .command('list')
      .description('the mock, configured providers and their models, built-in providers and whether their key is set')
      .addOption(json())
      .action(async (options) => (await commands()).modelList(options)),
    ['pai model list --json'],
  );
  withExamples(
    model
      .command('resolve')
      .description('the concrete provider, model, context window and output limit that chat would use')
      .option('--provider <name>', 'provider')
      .option('--model <id>', 'model id, or provider/model')
      .addOption(json())
      .action(async (options) => (await commands()).modelResolve(options)),
    ['pai model resolve --json', 'pai model resolve --provider anthropic --json'],
  );
  withExamples(
    model
      .command('default')
      .description('show the default provider/model, or set it in the config')
      .argument('[provider/model]', 'the new default')
      .addOption(json())
      .action(async (value: string | undefined, options) => (await commands()).modelDefault(value, options)),
    ['pai model default', 'pai model default openai/gpt-4o-mini'],
  );

  withExamples(
    program
      .command('transcribe')
      .description('print the words of an audio file, by transcription.model of the config (what voice messages use)')
      .argument('<file>', 'the audio file (ogg, mp3, wav, m4a, webm, ...)')
      .addOption(json())
      .action(async (file: string, options) => (await commands()).transcribeCommand(file, options)),
    ['pai transcribe voice.ogg', 'pai transcribe --json memo.m4a'],
  );

  const config = program.command('config').description('the pai configuration');
  withExamples(
    config
      .command('show')
      .description('the effective configuration, keys redacted')
      .addOption(json())
      .action(async (options) => (await commands()).configShow(options)),
    ['pai config show --json'],
  );
  return program;
}
