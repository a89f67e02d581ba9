import { describeDamage } from '../agent/damaged-thread.js';
import { printJson, printLines, readStdin } from '../core/cli.js';
import { ClawError, usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { withStoredSecrets } from '../core/secrets-file.js';
import type { Check } from './doctor.js';
import type { StatusDetails, SystemStatus } from './status.js';
import type { ModelChoice, UpResult } from './system.js';
import { isSetupProvider, SETUP_PROVIDERS, type SetupFlags, type SetupProvider } from './setup-types.js';

interface Json {
  json?: boolean;
}

export async function setup(options: SetupFlags): Promise<void> {
  const home = resolveHome();
  const asked = !options.yes && !options.provider && !options.apiKeyStdin && !options.telegramTokenStdin && !options.discordTokenStdin;
  if (asked && process.stdin.isTTY && process.stdout.isTTY) return (await import('./setup-prompts.js')).setupInteractively(home, options, () => up({}));
  if (!options.provider && !options.telegramTokenStdin && !options.discordTokenStdin) {
    throw usageError('nothing to set up', 'pass --provider (with --api-key-stdin), --telegram-token-stdin or --discord-token-stdin; or run theclaw setup on a terminal to be asked');
  }
  if (options.provider && !isSetupProvider(options.provider)) throw usageError(`unknown provider ${JSON.stringify(options.provider)}`, `use one of: ${SETUP_PROVIDERS.join(', ')}`);
  if (options.apiKeyStdin && !options.provider) throw usageError('--api-key-stdin needs --provider', 'say whose key it is, e.g. --provider openai');
  // One line each, in this order, for the secrets asked for: the API key, the Telegram token, the Discord token.
  const lines =
    options.apiKeyStdin || options.telegramTokenStdin || options.discordTokenStdin
      ? (await readStdin(usageError('stdin is a terminal', 'pipe the key or token in, or run theclaw setup without flags to be asked with hidden input'))).toString('utf8').split(/\r?\n/)
      : [];
  const apiKey = options.apiKeyStdin ? lines.shift()?.trim() : undefined;
  const telegramToken = options.telegramTokenStdin ? lines.shift()?.trim() : undefined;
  const discordToken = options.discordTokenStdin ? lines.shift()?.trim() : undefined;
  if (options.apiKeyStdin && !apiKey) throw usageError('no API key on stdin', 'pipe it in: printf \'%s\\n\' "$KEY" | theclaw setup --provider P --api-key-stdin');
  if (options.telegramTokenStdin && !telegramToken) throw usageError('no Telegram bot token on stdin', 'pipe it in (after the API key, on its own line, when both are given)');
  if (options.discordTokenStdin && !discordToken) throw usageError('no Discord bot token on stdin', 'pipe it in (after the API key and the Telegram token, each on its own line, when they are given)');
  const { setupModel } = await import('./setup.js');
  const model = options.provider ? await setupModel(home, { provider: options.provider as SetupProvider, baseUrl: options.baseUrl, model: options.model, apiKey, env: process.env }) : undefined;
  const telegram = telegramToken
    ? await (await import('./setup-telegram.js')).setupTelegram(home, telegramToken, {
        apiRoot: options.telegramApiRoot,
        waitSeconds: options.telegramWaitSeconds,
        onWaiting: (bot) => process.stderr.write(`Now send /start to @${bot} in Telegram: the first person to message it becomes its owner (waiting ${options.telegramWaitSeconds} s)\n`),
      })
    : undefined;
  const discord = discordToken
    ? await (await import('./setup-discord.js')).setupDiscord(home, discordToken, {
        apiRoot: options.discordApiRoot,
        waitSeconds: options.discordWaitSeconds,
        onWaiting: (bot, inviteUrl) =>
          process.stderr.write(
            `Now send @${bot} a direct message in Discord: the first person to write to it becomes its owner (waiting ${options.discordWaitSeconds} s). To write to it you must share a server with it; invite it to yours with ${inviteUrl}\n`,
          ),
      })
    : undefined;
  const { setupSummary } = await import('./setup-summary.js');
  const summary = setupSummary(home, { model, telegram, discord });
  if (options.json) return printJson({ ...(model && { model }), ...(telegram && { telegram }), ...(discord && { discord }), next: summary.next });
  printLines(summary.lines);
}

export async function up(options: Json): Promise<void> {
  const system = await import('./system.js');
  const { talkLines } = await import('./up-summary.js');
  const result = await system.up(resolveHome());
  // Said on every start, not only the first: a reply from the mock must never pass for a model's.
  if (result.model.offline) process.stderr.write(`Notice: ${system.OFFLINE_NOTICE}\n`);
  warnOfShellModel(result);
  for (const changed of result.config_changed) process.stderr.write(`Warning: ${changed.message}\n`);
  // The rest of the system runs without a channel that failed; the owner has to hear of it.
  for (const channel of result.xgw.channels.filter((c) => c.state !== 'running' && c.state !== 'standby')) {
    process.stderr.write(`Warning: channel ${channel.id} is not running (${channel.detail ?? channel.state}) - theclaw doctor says how to fix it\n`);
  }
  for (const problem of result.heartbeats.problems) process.stderr.write(`Warning: a heartbeat timer was not set (${problem}) - see: agent heartbeat <id>\n`);
  if (options.json) return printJson(result);
  const daemon = (name: 'notifier' | 'xgw', pid: number | null) => `${result.started.includes(name) ? 'started' : 'running already'} (pid ${pid})`;
  printLines([
    `TheClaw is up (data: ${result.home})`,
    `  notifier  ${daemon('notifier', result.notifier.pid)}`,
    `  xgw       ${daemon('xgw', result.xgw.pid)}`,
    `  agents    ${agentsLine(result)}`,
    `  model     ${modelLine(result.model)}`,
    ...(result.heartbeats.set.length ? [`  heartbeats set again from the agents' configs: ${result.heartbeats.set.join(', ')}`] : []),
    ...(result.repaired.length ? [`  privacy   made ${result.repaired.length} path(s) under the home private (others could read or enter them), e.g. ${result.repaired.slice(0, 3).join(', ')}`] : []),
    ...talkLines(
      result.talk,
      result.xgw.channels.some((channel) => channel.type === 'terminal'),
    ),
    'Next: theclaw status · theclaw doctor · theclaw down',
  ]);
}

/** `admin, warden (created warden); on host-a: maintainer, evolver` */
function agentsLine(result: UpResult): string {
  const here = result.agents.length ? result.agents.join(', ') : 'none on this host';
  const created = result.created.length ? ` (created ${result.created.join(', ')})` : '';
  const hosts = new Map<string, string[]>();
  for (const [id, host] of Object.entries(result.elsewhere)) hosts.set(host, [...(hosts.get(host) ?? []), id]);
  return `${here}${created}${[...hosts].map(([host, ids]) => `; on ${host}: ${ids.join(', ')}`).join('')}`;
}

export async function reload(options: Json): Promise<void> {
  const outcomes = await (await import('./system.js')).reload(resolveHome());
  const refused = outcomes.flatMap((outcome) => (outcome.state === 'refused' ? [outcome] : []));
  if (options.json) {
    printJson({ ok: refused.length === 0, daemons: outcomes });
    if (refused.length > 0) process.exitCode = 1; // the document says why; a second one would break readers
    return;
  }
  const { describeReload } = await import('../xgw/control.js');
  const { describeFindings } = await import('../xgw/config.js');
  const { describeNotifierReload } = await import('../notifier/control.js');
  printLines(
    outcomes.flatMap((outcome) => {
      if (outcome.state === 'not_running') return [`${outcome.daemon} is not running: it reads its config when it starts (theclaw up)`];
      if (outcome.state === 'refused') return [`${outcome.daemon} refused its config and runs on with the one it had`];
      return outcome.daemon === 'xgw' ? [...describeReload(outcome.result), ...describeFindings(outcome.result.warnings)] : describeNotifierReload(outcome.result);
    }),
  );
  if (refused.length > 0) {
    // Each refusal's own fix: two daemons' problems need both.
    const fixes = [...new Set(refused.map((outcome) => outcome.suggestion ?? 'fix the config, then run theclaw reload again'))];
    throw new ClawError('invalid', refused.map((outcome) => outcome.error).join('; '), { suggestion: fixes.join('; ') });
  }
}

export async function maintain(options: Json): Promise<void> {
  const home = resolveHome();
  // Most sweeps find nothing new: those need not load the agent runtime the sweep uses.
  const { hasNew, sweepsHere } = await import('./feed-sweep.js');
  const result = (await sweepsHere(home)) && (await hasNew(home, 'errors', 'maintainer')) ? await (await import('./maintainer.js')).sweep(home) : { read: 0, reported: [] };
  if (options.json) return printJson(result);
  printLines([`read ${result.read} error(s); ${result.reported.length ? `reported ${result.reported.length} new incident(s)` : 'no new incident'}`, ...result.reported.map((text) => `  ${text}`)]);
}

export async function ward(options: Json): Promise<void> {
  const home = resolveHome();
  const { hasNew, sweepsHere } = await import('./feed-sweep.js');
  const result = (await sweepsHere(home)) && (await hasNew(home, 'toolcalls', 'warden')) ? await (await import('./warden.js')).ward(home) : { read: 0, findings: [] };
  if (options.json) return printJson(result);
  const untold = result.findings.filter((finding) => !finding.told).length;
  printLines([
    `reviewed ${result.read} command(s); ${result.findings.length ? `found ${result.findings.length} new dangerous one(s)${untold ? `, ${untold} not told: the owner has no chat with admin yet` : ''}` : 'nothing new is dangerous'}`,
    ...result.findings.map((finding) => `  ${finding.agent} ${finding.thread} #${finding.event}: ${finding.rules.map((rule) => rule.rule).join(', ')}: ${finding.command}`),
  ]);
}

export async function evolve(options: Json): Promise<void> {
  const result = await (await import('./evolver.js')).evolve(resolveHome());
  if (!options.json) {
    printLines([
      result.skipped
        ? `no reflection: ${result.skipped}`
        : `reflected on ${result.since} to ${result.until}: ${result.usage.calls} model call(s), ${result.usage.input_tokens} in + ${result.usage.output_tokens} out tokens`,
      ...result.agents.map(
        (agent) =>
          `  ${agent.agent}: ${agent.outcome}${agent.detail ? ` (${agent.detail})` : ''}${agent.proposals.map((p) => `\n    ${p.code} ${p.file}: ${p.summary}${p.told ? '' : ' (not told: the owner has no chat with it or admin yet)'}`).join('')}`,
      ),
    ]);
  }
  // A reflection the model failed makes the timer's run fail, as notifier timer list shows.
  const failed = result.agents.filter((agent) => agent.outcome === 'failed');
  if (failed.length)
    throw new ClawError('io', `the reflection on ${failed.map((agent) => `${agent.agent} (${agent.detail})`).join(', ')} failed`, {
      suggestion: 'see theclaw logs and theclaw doctor; the next reflection covers its own day',
    });
  if (options.json) printJson(result);
}

export async function serviceInstall(options: Json): Promise<void> {
  const result = (await import('./service.js')).installService(resolveHome());
  if (options.json) return printJson(result);
  printLines([
    ...(result.platform === 'launchd'
      ? ['Save these as launchd agents, then load them:']
      : [result.written.length ? `Wrote ${result.written.join(', ')}` : 'The units are installed already, unchanged.', 'Next:']),
    ...result.next.map((line) => (result.platform === 'systemd' ? `  ${line}` : line)),
  ]);
}

export async function serviceUninstall(options: Json): Promise<void> {
  const result = (await import('./service.js')).uninstallService(resolveHome());
  if (options.json) return printJson(result);
  printLines(result.removed.length ? [`Removed ${result.removed.join(', ')}`, 'Next:', ...result.next.map((line) => `  ${line}`)] : ['No theclaw units are installed.']);
}

export async function down(options: Json): Promise<void> {
  const stopped = await (await import('./system.js')).down(resolveHome());
  if (options.json) return printJson({ stopped });
  printLines([stopped.length ? `stopped ${stopped.length > 1 ? `${stopped.slice(0, -1).join(', ')} and ${stopped.at(-1)}` : stopped[0]}` : 'nothing was running']);
}

export async function status(options: Json & { recent?: number }): Promise<void> {
  const home = resolveHome();
  const { systemStatus, statusDetails } = await import('./status.js');
  const status = await systemStatus(home, withStoredSecrets(home, process.env));
  warnOfShellModel(status);
  const details = options.recent ? await statusDetails(home, options.recent) : undefined;
  if (options.json) return printJson(details ? { ...status, details } : status);
  printLines([...formatStatus(status), ...(details ? formatDetails(details) : [])]);
}

export async function retry(options: Json): Promise<void> {
  const { woken, resent } = await (await import('./system.js')).retry(resolveHome());
  if (options.json) return printJson({ woken, resent });
  printLines([
    ...(woken.length
      ? [
          `woke notifier: ${woken.length} handler(s) waiting out a backoff run now`,
          ...woken.map((w) => `  ${w.thread} (${w.consumer}): ${w.failures} failure(s)${w.last_error ? `: ${w.last_error}` : ''}`),
        ]
      : ['woke notifier: nothing was waiting out a backoff']),
    ...(resent.length ? [`replies delivery had given up on: ${resent.length}`] : []),
    ...resent.map((r) => `  ${r.agent} ${r.thread} event ${r.event_id}: ${r.outcome === 'sent' ? 'sent again' : r.outcome === 'gone' ? 'no longer in its thread' : `still not delivered: ${r.error}`}`),
  ]);
}

export async function logs(component: string | undefined, options: { lines: number; since?: string; follow?: boolean }): Promise<void> {
  const { logSources, recentLogLines, followLogs, parseSince } = await import('./logs.js');
  const sources = logSources(resolveHome(), component);
  const sinceMs = options.since === undefined ? undefined : Date.now() - parseSince(options.since);
  if (!options.follow) return printLines(recentLogLines(sources, { lines: options.lines, sinceMs }));
  // Before the first line is out: an interrupt as soon as something shows ends it cleanly.
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  printLines(recentLogLines(sources, { lines: options.lines, sinceMs }));
  await followLogs(sources, (line) => process.stdout.write(`${line}\n`), stop.signal);
}

export async function prune(options: Json & { olderThan: number; keepLogs: number; dryRun?: boolean }): Promise<void> {
  const report = await (await import('./prune.js')).prune(resolveHome(), { olderThanMs: options.olderThan * 86_400_000, keepLogs: options.keepLogs, dryRun: options.dryRun });
  if (options.json) return printJson(report);
  const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
  printLines([
    `${report.dry_run ? 'would free' : 'freed'} ${mb(report.freed_bytes)} (cut-off ${report.older_than})`,
    `  rotated logs: ${report.rotated_logs.files} file(s), ${mb(report.rotated_logs.bytes)}`,
    `  xgw: ${report.xgw.deliveries} delivery key(s), ${report.xgw.mailbox} read mailbox message(s), ${report.xgw.pairing_requests} expired pairing code(s)`,
    `  thread events: ${report.events.removed} acknowledged event(s) in ${report.events.threads} thread(s)`,
    `  WAL: ${report.wal.files} file(s) checkpointed, ${mb(report.wal.bytes)}`,
  ]);
}

export async function doctor(options: Json & { offline?: boolean }): Promise<void> {
  const home = resolveHome();
  const checks = await (await import('./doctor.js')).doctor(home, withStoredSecrets(home, process.env), Date.now(), { offline: options.offline });
  const failed = checks.filter((check) => check.status === 'fail');
  if (options.json) {
    printJson({ ok: failed.length === 0, checks });
    if (failed.length > 0) process.exitCode = 1; // the document says why; a second one would break readers
    return;
  }
  printLines(checks.flatMap(formatCheck));
  if (failed.length > 0) {
    // The findings are the output; the error line only sums them up and sets the exit code.
    throw new ClawError('invalid', `${failed.length} check(s) failed: ${failed.map((check) => check.name).join(', ')}`, { suggestion: 'apply the fixes listed above, then run theclaw doctor again' });
  }
}

export async function demo(options: Json & { real?: boolean; keep?: boolean }): Promise<void> {
  const { runDemo } = await import('./demo.js');
  // Ctrl-C still stops what the demo started and removes its home.
  const interrupted = new AbortController();
  const interrupt = () => interrupted.abort(new ClawError('aborted', 'the demo was interrupted', { suggestion: 'run theclaw demo again' }));
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  const progress = (line: string) => process.stderr.write(`${line}\n`);
  try {
    const result = await runDemo(process.env, { real: options.real, keep: options.keep, signal: interrupted.signal, onProgress: options.json ? undefined : progress });
    if (options.json) return printJson(result);
    printLines([
      `TheClaw demo (model: ${result.model}; up in ${result.timings.up_ms} ms, reply in ${result.timings.reply_ms} ms)`,
      '',
      `you → admin, through the web chat: ${result.message}`,
      `admin → you: ${result.reply}`,
      '',
      'What the message produced (inbox → thread → records → delivery):',
      ...result.threads.flatMap((thread) => [
        `  ${thread.path}`,
        ...thread.events.map((e) => `    #${e.id}  ${(e.subtype ? `${e.type}/${e.subtype}` : e.type).padEnd(16)} ${clip(e.source, 28).padEnd(28)}  ${e.summary}`),
      ]),
      `  delivered: event #${result.delivered.event_id} of ${result.delivered.thread} through ${result.delivered.channel} (acknowledged by agent deliver)`,
      '',
      options.keep ? `The demo's home is kept: ${result.home}` : 'Everything was stopped and the temporary home removed.',
      'Next: theclaw up (with OPENAI_API_KEY or ANTHROPIC_API_KEY set for a real model), then open the web chat URL it prints.',
    ]);
  } finally {
    process.off('SIGINT', interrupt);
    process.off('SIGTERM', interrupt);
  }
}

/** Said by up and status: the agents' model is notifier's, whatever keys this shell has now. */
function warnOfShellModel({ model, shell_model }: { model: ModelChoice; shell_model?: ModelChoice }): void {
  if (!shell_model) return;
  process.stderr.write(`Warning: notifier was started with another environment, so agents use ${modelLine(model)}, not ${modelLine(shell_model)} - to switch: theclaw down && theclaw up\n`);
}

function modelLine(model: ModelChoice): string {
  if (model.problem !== undefined) return `UNKNOWN: ${model.problem}`;
  return model.offline ? `${model.provider}/${model.model} (offline: no provider key)` : `${model.provider}/${model.model ?? '(default)'}`;
}

function clip(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

function formatStatus(s: SystemStatus): string[] {
  const mb = (bytes: number | null) => (bytes === null ? '' : `  ${Math.round(bytes / 1024 / 1024)} MB`);
  return [
    ...s.components.map(
      (c) =>
        `${c.name.padEnd(9)} ${c.died ? `DIED: it did not stop cleanly (killed, or see logs/${c.name}.log) - bring it back with theclaw up` : !c.running ? 'stopped' : !c.answering ? `running  pid ${c.pid}  NOT ANSWERING (see logs/${c.name}.log)` : `running  pid ${c.pid}  up ${duration(c.uptime_seconds ?? 0)}${mb(c.rss_bytes)}`}`,
    ),
    ...(s.browser
      ? [
          `${'browser'.padEnd(9)} running  pid ${s.browser.pid}${s.browser.answering ? '' : '  NOT ANSWERING (see logs/browser.log)'}${mb(s.browser.rss_bytes)}  ${s.browser.browsers.length} browser(s) open`,
          ...s.browser.browsers.map((b) => `  ${b.agent.padEnd(11)} ${b.pages} page(s)${mb(b.memory_bytes)}`),
        ]
      : []),
    ...s.config_changed.map((changed) => `${'config'.padEnd(9)} ${changed.message}`),
    ...s.channels.map((c) => `  ${c.id}: ${c.state}${c.detail ? ` (${c.detail})` : ''}${c.url ? `  ${c.url}` : ''}`),
    s.agents.length ? 'agents:' : 'agents: none yet (theclaw up creates the system agents)',
    ...s.agents.flatMap((a) =>
      'error' in a
        ? `  ${a.id.padEnd(11)} BROKEN: ${a.error}`
        : [
            `  ${a.id.padEnd(11)} ${a.started ? 'started' : 'stopped'}${a.running ? ' (running)' : ''}  pending ${a.pending}  undelivered ${a.undelivered}  last activity ${a.last_activity ?? 'never'}  model ${a.model}`,
            ...a.damaged.map((d) => `    DAMAGED ${describeDamage(d)}`),
          ],
    ),
    s.queues.length ? `queues: ${s.pending} event(s) waiting` : 'queues: nothing waiting',
    ...s.queues.map((q) => `  ${q.thread} (${q.consumer}): ${q.pending} ${q.state}${q.failures ? `, ${q.failures} failure(s): ${q.last_error ?? ''}` : ''}`),
    `model: ${modelLine(s.model)}`,
    s.model_waits.length ? 'waiting for the model (theclaw retry tries now):' : 'waiting for the model: nothing',
    ...s.model_waits.map((w) => `  ${w.agent.padEnd(11)} ${w.pending} message(s) since ${w.since}, next try ${w.retry_at ?? 'now'}: ${w.error}`),
    s.recent_errors.length ? 'recent errors:' : 'recent errors: none',
    ...s.recent_errors.map((e) => `  ${e.created_at}  ${e.agent}/${e.thread} #${e.id}  ${e.stage}${e.kind ? ` (${e.kind}${e.status ? ` ${e.status}` : ''})` : ''}: ${e.error}`),
  ];
}

function formatDetails(d: StatusDetails): string[] {
  return [
    d.usage.length ? `usage (last ${d.days} days):` : 'usage: no model calls in the last days',
    ...d.usage.map((u) => `  ${u.day}  ${u.agent.padEnd(11)} ${u.calls} call(s)  ${u.input_tokens} in + ${u.output_tokens} out tokens  $${u.cost.toFixed(4)}`),
    ...d.threads.flatMap((t) => [
      `${t.agent}/${t.thread}:`,
      ...t.events.map((e) => `  #${e.id}  ${e.created_at}  ${(e.subtype ? `${e.type}/${e.subtype}` : e.type).padEnd(16)} ${e.error ? 'ERROR ' : ''}${e.summary}`),
    ]),
  ];
}

function formatCheck(check: Check): string[] {
  const mark = { ok: 'ok  ', warn: 'warn', fail: 'FAIL' }[check.status];
  return [`${mark}  ${check.name}: ${check.detail}`, ...(check.fix ? [`      fix: ${check.fix}`] : [])];
}

function duration(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor((seconds % 3600) / 60)).padStart(2, '0')}m`;
}
