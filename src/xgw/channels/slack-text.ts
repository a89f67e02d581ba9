/**
 * Slack's message text is markup: `&`, `<` and `>` are escaped, and `<…>` holds a mention (`<@U1>`),
 * a channel (`<#C1|general>`), a special mention (`<!here>`) or a link (`<https://x|label>`).
 * The agent reads and writes plain text, so this is the one pair that crosses that line.
 */

/**
 * What the agent sends, as Slack text that shows it as written: the three characters escaped, so
 * that nothing in it becomes a control sequence (`<!channel>` pings no one, `<@U1>` no one).
 */
export function toSlackText(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * A person's Slack text as plain text: a user mention as `@U1`, a channel as `#general`, a
 * special mention as `@here`, a link as its label and URL (`label (https://x)`, or the URL alone),
 * then the escapes undone. The inverse of `toSlackText`.
 */
export function fromSlackText(text: string): string {
  const plain = text.replace(/<([^<>]*)>/g, (_, inner: string) => {
    const [target = '', label] = splitLabel(inner);
    if (target.startsWith('@')) return `@${label ?? target.slice(1)}`;
    if (target.startsWith('#')) return `#${label ?? target.slice(1)}`;
    if (target.startsWith('!')) return label ?? `@${target.slice(1).split('^')[0]}`;
    if (label === undefined || label === target || label === target.replace(/^mailto:/, '')) return target.replace(/^mailto:/, '');
    return `${label} (${target})`;
  });
  return plain.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

function splitLabel(inner: string): [string, string | undefined] {
  const bar = inner.indexOf('|');
  return bar < 0 ? [inner, undefined] : [inner.slice(0, bar), inner.slice(bar + 1)];
}
