/**
 * Replaces bot tokens, as written and as percent-encoded in a URL, with `[redacted]`: the
 * platform clients' errors can carry them (grammY's hold the request URL), and no error text may.
 */
export function createTokenRedactor(...tokens: string[]): (text: string) => string {
  const forms = [...new Set(tokens.flatMap((token) => [token, encodeURIComponent(token)]))];
  return (text) => forms.reduce((out, form) => out.split(form).join('[redacted]'), text);
}
