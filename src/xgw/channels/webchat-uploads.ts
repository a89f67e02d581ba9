import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { ClawError } from '../../core/errors.js';
import type { AttachmentKind } from '../../core/message.js';
import type { InboundFile } from '../types.js';

/** How long an upload waits for the message that carries it. */
const HELD_MS = 10 * 60_000;
/** Uploads held at once (each at most the channel's `media.max_bytes`); the oldest give way. */
const MAX_HELD = 16;

interface Upload {
  peer: string;
  file: InboundFile & { name: string; bytes: number };
  data: Buffer;
  at: number;
}

/**
 * Files the web chat page uploaded (POST /upload) for the message it sends next. Held in memory
 * until that message takes them, for at most HELD_MS: the gateway then stores them in the
 * agent's `files/` like a Telegram file (through the channel's `download`).
 */
export class WebchatUploads {
  private readonly held = new Map<string, Upload>();

  constructor(private readonly maxBytes: number) {}

  /** Reads an upload's body; a body past the limit is `usage` (413 for the page). Returns its id. */
  async receive(req: IncomingMessage, peer: string, name: string): Promise<string> {
    const tooLarge = () => new ClawError('usage', `the file is larger than ${this.maxBytes} bytes`, { suggestion: 'send a smaller file, or raise media.max_bytes in the xgw config' });
    // Refused before a byte is read where the length is given; else read to the end, keeping
    // nothing past the limit, so that the page gets its answer rather than a cut connection.
    if (Number(req.headers['content-length'] ?? 0) > this.maxBytes) throw tooLarge();
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size <= this.maxBytes) chunks.push(chunk as Buffer);
    }
    if (size > this.maxBytes) throw tooLarge();
    const data = Buffer.concat(chunks);
    if (data.length === 0) throw new ClawError('usage', 'the file is empty', { suggestion: 'attach a file with something in it' });
    const mime = (req.headers['content-type'] ?? 'application/octet-stream').split(';')[0]!.trim().toLowerCase();
    const id = randomBytes(16).toString('hex');
    const now = Date.now();
    for (const [key, upload] of this.held) if (now - upload.at > HELD_MS || this.held.size >= MAX_HELD) this.held.delete(key);
    this.held.set(id, { peer, data, at: now, file: { kind: kindOf(mime), ref: id, mime_type: mime, name: name.slice(0, 200) || 'file', bytes: data.length } });
    return id;
  }

  /** The peer's upload of this id, if it is still held. */
  find(peer: string, id: string): Upload['file'] | undefined {
    const upload = this.held.get(id);
    return upload && upload.peer === peer && Date.now() - upload.at <= HELD_MS ? upload.file : undefined;
  }

  /** The bytes, for the gateway to store; a file no longer held is `not_found`. */
  data(file: InboundFile): Buffer {
    const upload = this.held.get(file.ref);
    if (!upload) throw new ClawError('not_found', 'the uploaded file is no longer held', { suggestion: 'attach it again' });
    return upload.data;
  }

  forget(ids: readonly string[]): void {
    for (const id of ids) this.held.delete(id);
  }
}

function kindOf(mime: string): AttachmentKind {
  if (/^image\/(jpeg|png|webp|gif)$/.test(mime)) return 'image';
  if (mime.startsWith('audio/')) return 'audio';
  if (mime.startsWith('video/')) return 'video';
  return 'document';
}
