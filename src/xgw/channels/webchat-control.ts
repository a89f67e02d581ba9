import type { IncomingMessage, ServerResponse } from 'node:http';
import { isClawError, type ErrorKind } from '../../core/errors.js';
import type { ChannelContext } from '../channel.js';
import { isOwnerWebchat } from '../config.js';
import type { WebchatChannelConfig } from '../types.js';
import { CONTROL_ACTION_PATH, CONTROL_CONVERSATION_PATH, CONTROL_DATA_PATH, CONTROL_PAGE_PATH } from './control-protocol.js';
import { parseControlAction } from '../control-source.js';
import { CONTROL_PAGE } from './webchat-control-page.js';
import { bearerToken, sendJson, unauthorized } from './webchat-http.js';

/** An action is a few fields: a larger body is not one. */
const MAX_ACTION_BYTES = 16 * 1024;

const STATUS_OF_KIND: Partial<Record<ErrorKind, number>> = { usage: 400, not_found: 404, conflict: 409, invalid: 409 };

export interface ControlSite {
  config: WebchatChannelConfig;
  context: ChannelContext;
  hasToken(candidate: string | undefined): boolean;
  /** Whether a request's Origin is a page this server served (webchat-routes.ts). */
  isAllowedOrigin(origin: string | undefined): boolean;
  /** Answers with a page (the pages' headers: CSP, no framing). */
  servePage(req: IncomingMessage, res: ServerResponse, html: string): void;
}

/** Whether a path is the control page's (answered by WebchatControl, whichever web chat is asked). */
export function isControlPath(pathname: string): boolean {
  return [CONTROL_PAGE_PATH, CONTROL_DATA_PATH, CONTROL_CONVERSATION_PATH, CONTROL_ACTION_PATH].includes(pathname);
}

/**
 * The owner's control page's HTTP side (control-protocol.ts). Only the owner's web chat
 * (`access: open` on loopback, whose every peer is the owner: config.ts ownerWebchats) has it:
 * another answers every path of it 404, token or not, since its token is shared with guests. An
 * action is a POST with the token in `Authorization` (which no other site's page can set without
 * this server allowing it: it answers no CORS preflight), a JSON body, and the Origin of a page
 * this server served, so another site open in the same browser can neither read nor act.
 */
export class WebchatControl {
  constructor(private readonly site: ControlSite) {}

  handle(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const { config } = this.site;
    if (!isOwnerWebchat(config)) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end(`Not found: the control page is served only by the owner's web chat (access: open, on loopback; ${config.id} is not)\n`);
    }
    if (url.pathname === CONTROL_PAGE_PATH) {
      const queryToken = url.searchParams.get('token');
      if (queryToken !== null && !this.site.hasToken(queryToken)) return void unauthorized(res);
      if (req.method !== 'GET' && req.method !== 'HEAD') return void methodNotAllowed(res, 'GET, HEAD');
      return void this.site.servePage(req, res, CONTROL_PAGE);
    }
    if (!this.site.hasToken(bearerToken(req.headers.authorization))) return void unauthorized(res);
    if (url.pathname === CONTROL_DATA_PATH) {
      if (req.method !== 'GET') return void methodNotAllowed(res, 'GET');
      return void this.answer(res, 'view', () => this.source().view());
    }
    if (url.pathname === CONTROL_CONVERSATION_PATH) {
      if (req.method !== 'GET') return void methodNotAllowed(res, 'GET');
      const agent = url.searchParams.get('agent') ?? '';
      const thread = url.searchParams.get('thread') ?? '';
      return void this.answer(res, 'conversation', () => this.source().conversation(agent, thread));
    }
    if (req.method !== 'POST') return void methodNotAllowed(res, 'POST');
    const origin = req.headers.origin;
    if (!this.site.isAllowedOrigin(origin)) {
      this.site.context.logger.warn(`${config.id}: refused a control action from origin ${JSON.stringify(origin ?? null)}`);
      return void sendJson(res, 403, { error: 'Forbidden origin', suggestion: 'act from the control page this server serves' });
    }
    if (!/^application\/json\b/.test(req.headers['content-type'] ?? '')) return void sendJson(res, 415, { error: 'an action is JSON', suggestion: 'send it with Content-Type: application/json' });
    void this.act(req, res);
  }

  private async act(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: Buffer | null;
    try {
      body = await readBodyWithin(req, MAX_ACTION_BYTES);
    } catch {
      return void res.destroy(); // the client went away mid-body: nobody to answer
    }
    if (body === null) return sendJson(res, 413, { error: `an action is at most ${MAX_ACTION_BYTES} bytes`, suggestion: 'reload the control page' });
    let raw: unknown;
    try {
      raw = JSON.parse(body.toString('utf8'));
    } catch {
      return sendJson(res, 400, { error: 'the action is not JSON', suggestion: 'reload the control page' });
    }
    await this.answer(res, 'action', () => this.source().act(parseControlAction(raw)));
  }

  private source() {
    const source = this.site.context.control;
    if (!source) throw new Error('this gateway has no control source');
    return source;
  }

  /** Runs `work` and answers its value, or its error with the status its kind says. */
  private async answer(res: ServerResponse, what: string, work: () => Promise<unknown>): Promise<void> {
    try {
      sendJson(res, 200, await work());
    } catch (error) {
      const status = isClawError(error) ? (STATUS_OF_KIND[error.kind] ?? 500) : 503;
      if (status >= 500) this.site.context.logger.warn(`${this.site.config.id}: control ${what}: ${error instanceof Error ? error.message : String(error)}`);
      sendJson(res, status, { error: error instanceof Error ? error.message : String(error), ...(isClawError(error) && error.suggestion ? { suggestion: error.suggestion } : {}) });
    }
  }
}

function methodNotAllowed(res: ServerResponse, allow: string): void {
  res.writeHead(405, { Allow: allow, 'Content-Type': 'text/plain; charset=utf-8' });
  res.end('Method not allowed\n');
}

/** The body, or null past `limit` bytes (the rest is not read). */
async function readBodyWithin(req: IncomingMessage, limit: number): Promise<Buffer | null> {
  if (Number(req.headers['content-length'] ?? 0) > limit) return null;
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of req) {
    size += (part as Buffer).length;
    if (size > limit) return null;
    parts.push(part as Buffer);
  }
  return Buffer.concat(parts);
}
