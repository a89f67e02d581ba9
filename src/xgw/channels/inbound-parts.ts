import type { AttachmentKind } from '../../core/message.js';

// Pieces of an inbound message that Discord and Slack take apart the same way.

/** Images the models take are images; audio and video by their type; anything else a document. */
export function kindOfMimeType(mimeType: string | undefined): AttachmentKind {
  if (/^image\/(jpeg|png|webp|gif)/.test(mimeType ?? '')) return 'image';
  if (mimeType?.startsWith('audio/')) return 'audio';
  if (mimeType?.startsWith('video/')) return 'video';
  return 'document';
}

/** Joins the text around cut-out mentions; where a cut leaves two spaces side by side, one goes with it. */
export function joinCut(parts: string[]): string {
  return parts.reduce((before, after) => before + (/\s$/.test(before) && /^\s/.test(after) ? after.slice(1) : after));
}
