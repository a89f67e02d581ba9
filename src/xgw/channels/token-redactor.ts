/**
 * Replaces a bot token, as written and as percent-encoded in a URL, with `[redacted]`: the
 * platform clients' errors can carry it (grammY's hold the request URL), and no error text may.
 */
export function createTokenRedactor(token: string): (text: string) => string {
  const forms = [...new Set([token, encodeURIComponent(token)])];
  return (text) => forms.reduce((out, form) => out.split(form).join('[redacted]'), text);
}
