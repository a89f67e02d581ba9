import { describe, expect, it } from 'vitest';
import { createRedactor } from '../core/secrets.js';
import { shownCommand } from './reply-progress.js';

describe('the command a person is shown while it runs', () => {
  const redact = createRedactor({ THECLAW_HOME: '/nonexistent', OPENAI_API_KEY: 'sk-live-0123456789abcdef' });

  it('has no secret in it', () => {
    expect(shownCommand('curl -H "Authorization: Bearer sk-live-0123456789abcdef" https://api.example.com', redact)).toBe('curl -H "Authorization: Bearer [redacted]" https://api.example.com');
  });

  it('is one line, cut to 80 characters without splitting one', () => {
    expect(shownCommand('cd /tmp &&\n\tls   -la\n', redact)).toBe('cd /tmp && ls -la');
    const long = `echo ${'é'.repeat(73)}🙂🙂🙂`;
    const shown = shownCommand(long, redact);
    expect(Array.from(shown)).toHaveLength(80);
    expect(shown.endsWith('🙂…')).toBe(true);
    expect(shownCommand('x'.repeat(80), redact)).toBe('x'.repeat(80));
  });
});
