import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isAlive } from '../core/process.js';
import { findMarked, killMarked, TURN_MARK, type ProcessMark } from '../core/turn-processes.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { startSystem, until, type System } from './support.js';

/**
 * No tool process outlives its turn, even when the process running the turn is SIGKILLed: the
 * model's command leaves `setsid sleep 600` (its own session, out of any group kill) and waits in
 * `sleep 600`; the process that runs the turn (a warm runner, or a plain `agent run`) is killed;
 * notifier's retry starts the next `agent run`, which reaps the dead run's turn by its mark, and
 * the message is still answered.
 */
let system: System | undefined;
let mark: ProcessMark | undefined;

afterEach(async () => {
  // Whatever the outcome, no sleep of this test is left behind on the machine.
  if (mark) await killMarked(mark);
  mark = undefined;
  await system?.stop();
  system = undefined;
});

const file = (s: System, name: string) => join(s.home, name);
const read = (s: System, name: string) => (existsSync(file(s, name)) ? readFileSync(file(s, name), 'utf8').trim() : '');

describe('the processes of a killed turn', () => {
  it.each([
    { where: 'a warm runner', runners: true, owner: /dist\/notifier\/runner\.js/ },
    { where: 'a plain agent run', runners: false, owner: /agent.*\brun\b.*admin/ },
  ])('are gone after the next run when $where running the turn was SIGKILLed; the message is answered', async ({ runners, owner }) => {
    // The marks are what `none` has; a sandbox's PID namespace would end the sleeps by itself.
    const s = await startSystem({ logLevel: 'info', runners, sandbox: 'none' });
    system = s;
    // $PPID of the command's bash is the process running the turn.
    const command = `echo $PPID > "$THECLAW_HOME/owner"; setsid sleep 600 & echo $! > "$THECLAW_HOME/sleeper"; echo $THECLAW_TURN > "$THECLAW_HOME/mark"; sleep 600`;
    s.llm.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command } }, { kind: 'text', text: 'back after the crash' });
    s.telegram.queueUpdate(textUpdate({ from: 4243, text: 'start something long' }));

    await until(() => read(s, 'mark'), 'the command to start', 20_000, 50);
    mark = { name: TURN_MARK, value: read(s, 'mark') };
    const ownerPid = Number(read(s, 'owner'));
    const sleeper = Number(read(s, 'sleeper'));
    expect(readFileSync(`/proc/${ownerPid}/cmdline`, 'utf8').split('\0').join(' ')).toMatch(owner);
    // The setsid sleep, and the command's own bash waiting in `sleep 600` (bash may exec it).
    const marked = await until(() => (findMarked(mark!).length >= 2 ? findMarked(mark!) : null), 'the command to wait in its sleep', 5_000, 20);
    expect(marked).toContain(sleeper);

    process.kill(ownerPid, 'SIGKILL');
    await until(() => s.telegram.sent.some((sent) => sent.text === 'back after the crash'), 'the answer after the retry', 30_000, 50);
    // The retried run reaped before it answered; the kernel may take a moment to end them.
    await until(() => findMarked(mark!).length === 0, 'no process with the mark of the killed turn', 5_000, 50);
    // A process being killed loses its environment (so no mark is found) a moment before it is gone.
    await until(() => !isAlive({ pid: sleeper, start: null }), 'the setsid sleep to be gone', 5_000);
    expect(readFileSync(join(s.home, 'agents', 'admin', 'logs', 'agent.log'), 'utf8')).toMatch(/killed [23] process\(es\) left running by the turns of a run that died/);
  });
});
