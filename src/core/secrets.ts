/**
 * Secrets are API keys and tokens held in environment variables. They must never reach logs,
 * events or the environment of a command the model runs.
 */
const SECRET_NAME = /(_API_KEY|_TOKEN|_SECRET|_PASSWORD|_ACCESS_KEY)$|^(API_KEY|TOKEN|SECRET|PASSWORD)$/i;

/** Secret values shorter than this are too likely to appear in ordinary text to be replaced. */
const MIN_SECRET_LENGTH = 8;

export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name);
}

/**
 * A copy of `env` without the variables that hold secrets: those named like one, and `extraNames`
 * (variables a config names as holding a key, e.g. a provider's custom `api_key_env`).
 */
export function withoutSecrets(env: NodeJS.ProcessEnv, extraNames: readonly string[] = []): NodeJS.ProcessEnv {
  const clean: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (!isSecretName(name) && !extraNames.includes(name)) clean[name] = value;
  }
  return clean;
}

/**
 * A secret as it appears in text: as it is, URL-encoded, and inside base64 or base64url text.
 * Base64 writes 3 bytes as 4 characters, so inside an encoded blob the secret's own characters
 * depend on where it starts within a group of 3: for each of the 3 offsets, the whole groups that
 * hold only the secret's bytes (whatever surrounds it, one of them is in the blob).
 */
export function encodedForms(secret: string): string[] {
  const forms = new Set([secret, encodeURIComponent(secret)]);
  const bytes = Buffer.from(secret);
  for (let skip = 0; skip < 3; skip++) {
    const inner = bytes.subarray(skip);
    const whole = inner.subarray(0, inner.length - (inner.length % 3));
    forms.add(whole.toString('base64'));
    forms.add(whole.toString('base64url'));
  }
  return [...forms];
}

/**
 * Replaces every secret value found in `env` (and any `extra` ones), and their encoded forms
 * (see encodedForms), with `[redacted]`. Best effort against text a command printed: a secret
 * transformed otherwise (reversed, hex) is not recognised.
 */
export function createRedactor(env: NodeJS.ProcessEnv = process.env, extra: string[] = []): (text: string) => string {
  const values = [
    ...Object.entries(env)
      .filter(([name]) => isSecretName(name))
      .map(([, value]) => value ?? ''),
    ...extra,
  ]
    .filter((value) => value.length >= MIN_SECRET_LENGTH)
    .flatMap(encodedForms)
    .filter((value) => value.length >= MIN_SECRET_LENGTH)
    // Longest first, so a secret that contains another one is replaced whole.
    .sort((a, b) => b.length - a.length);
  if (values.length === 0) return (text) => text;
  return (text) => values.reduce((out, value) => out.split(value).join('[redacted]'), text);
}
