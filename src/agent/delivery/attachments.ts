import { isAbsolute, join, relative } from 'node:path';
import type { Attachment } from '../../core/message.js';
import type { ImageRef } from '../../pai/index.js';
import type { AgentDir } from '../agent-dir.js';
import type { ModelInput } from '../turn/index.js';

/**
 * A message's files for the model. Each is named in the text by its path, so the model can read
 * it with bash_exec (a document, a picture it cannot see); an image also goes in as an image when
 * the model takes images, and where it does not, the text says so, for the model to tell the
 * person. Only files in the agent's own directory count (xgw stores them in `files/`): a path
 * elsewhere, in a message pushed by hand, is named but never read into a request.
 */
export function modelInput(dir: AgentDir, text: string, attachments: readonly Attachment[], seesImages: boolean): ModelInput {
  if (attachments.length === 0) return { text, images: [] };
  const images: ImageRef[] = [];
  const lines = attachments.map((attachment) => {
    const path = attachment.path === undefined ? undefined : isAbsolute(attachment.path) ? attachment.path : join(dir.root, attachment.path);
    const what = [attachment.mime_type, attachment.bytes === undefined ? undefined : sizeOf(attachment.bytes)].filter(Boolean).join(', ');
    const named = `${attachment.name ? `"${attachment.name}" ` : ''}${path ?? attachment.url ?? '(no file)'}${what ? ` (${what})` : ''}`;
    // A person's file that did not come with its message (shared-files.ts receiveFiles).
    if (path === undefined && attachment.url === undefined) return `[${attachment.type}: ${named}. It did not reach me: I say so, and ask for it again]`;
    if (attachment.type === 'image' && seesImages && ownFile(dir, attachment) !== undefined) {
      images.push({ path: path!, mime_type: attachment.mime_type ?? 'image/jpeg' });
      return `[image, shown: ${named}]`;
    }
    if (attachment.type === 'image') return `[image: ${named}. I cannot see images with the model I use: I say so, and offer what I can do with the file]`;
    if (attachment.type === 'voice' && attachment.transcribed) return `[voice message: ${named}. Its words, transcribed, are the text above]`;
    return `[${attachment.type}: ${named}. I can read it with bash_exec]`;
  });
  return { text: [text, ...lines].filter((line) => line !== '').join('\n'), images };
}

/** The absolute path of a file in the agent's own directory that a message carries; undefined for any other. */
export function ownFile(dir: AgentDir, attachment: Attachment): string | undefined {
  if (attachment.path === undefined) return undefined;
  const path = isAbsolute(attachment.path) ? attachment.path : join(dir.root, attachment.path);
  const inside = relative(dir.root, path);
  return inside.startsWith('..') || isAbsolute(inside) ? undefined : path;
}

function sizeOf(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1024))} KB`;
}
