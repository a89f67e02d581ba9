import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cliPath } from '../core/package.js';
import { withoutSecrets } from '../core/secrets.js';
import { createTestHome, expectClawError, runTool, startFakeOpenAI, writeFakePaiConfig, waitFor, type FakeLlmServer, type TestHome } from '../testing/index.js';
import { appendSession, readSession } from './session.js';

let t: TestHome;
const servers: FakeLlmServer[] = [];

beforeEach(() => {
  t = createTestHome();
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  t.cleanup();
});

describe('session files', () => {
  it('reads a missing file as an empty session', () => {
    expect(readSession(join(t.home, 'none.jsonl'))).toEqual([]);
  });

  it('appends one message per line and reads them back', () => {
    const file = join(t.home, 'deep', 'dir', 's.jsonl');
    appendSession(file, { role: 'user', content: 'hi\nthere' });
    appendSession(file, { role: 'assistant', content: '', tool_calls: [{ id: 'c1', name: 'bash_exec', arguments: { command: 'ls' } }] });
    appendSession(file, { role: 'tool', tool_call_id: 'c1', name: 'bash_exec', content: '{"stdout":"","stderr":"","exit_code":0}' });
    expect(readFileSync(file, 'utf8').split('\n')).toHaveLength(4);
    expect(readSession(file).map((line) => line.role)).toEqual(['user', 'assistant', 'tool']);
    expect(readSession(file)[0]).toEqual({ role: 'user', content: 'hi\nthere' });
  });

  it('ignores a torn last line and cuts it off at the next append', () => {
    const file = join(t.home, 's.jsonl');
    appendSession(file, { role: 'user', content: 'one' });
    appendFileSync(file, '{"role":"assistant","content":"half a li');
    expect(readSession(file)).toEqual([{ role: 'user', content: 'one' }]);
    appendSession(file, { role: 'user', content: 'two' });
    expect(readFileSync(file, 'utf8')).toBe('{"role":"user","content":"one"}\n{"role":"user","content":"two"}\n');
  });

  it('reports a bad line in the middle as invalid data, naming the line', () => {
    const file = join(t.home, 's.jsonl');
    writeFileSync(file, '{"role":"user","content":"ok"}\nnot json\n{"role":"user","content":"ok"}\n');
    expect(expectClawError(() => readSession(file), 'invalid').message).toMatch(/line 2/);
    writeFileSync(file, '{"role":"wizard","content":"ok"}\n');
    expect(expectClawError(() => readSession(file), 'invalid').message).toMatch(/line 1/);
  });
});

describe('a killed pai chat', () => {
  it('leaves a session that parses, and the next turn continues it', async () => {
    const server = await startFakeOpenAI();
    servers.push(server);
    // A long timeout: the first run must still be waiting when it is killed.
    writeFakePaiConfig(t.home, server, { timeoutSeconds: 60 });
    const env = withoutSecrets(t.env);
    const session = join(t.home, 'killed.jsonl');
    server.enqueue({ kind: 'hang' });

    const child = spawn(process.execPath, [cliPath('pai'), 'chat', '--session', session, 'first question'], { env, stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    await waitFor(() => existsSync(session) && readFileSync(session, 'utf8').includes('first question') && server.requests.length === 1, 'the user line and the request');
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');

    // A write torn by a crash: half a line, no newline.
    appendFileSync(session, '{"role":"assistant","content":"I was in the mid');
    expect(readSession(session)).toEqual([expect.objectContaining({ role: 'user', content: 'first question' })]);

    server.enqueue({ kind: 'text', text: 'second answer' });
    const next = await runTool('pai', ['chat', '--session', session, 'second question'], env);
    expect(next).toEqual({ code: 0, stdout: 'second answer\n', stderr: '' });

    const lines = readFileSync(session, 'utf8').split('\n');
    expect(lines.at(-1)).toBe('');
    for (const line of lines.slice(0, -1)) expect(() => JSON.parse(line), line).not.toThrow();
    expect(readSession(session).map((line) => [line.role, line.content])).toEqual([
      ['user', 'first question'],
      ['user', 'second question'],
      ['assistant', 'second answer'],
    ]);
    // The model saw the earlier question, not the torn fragment.
    const sent = JSON.stringify(server.requests[1]!.body.messages);
    expect(sent).toContain('first question');
    expect(sent).not.toContain('I was in the mid');
  });
});
