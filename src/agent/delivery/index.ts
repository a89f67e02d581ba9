/**
 * The delivery room: what passes between the person and the agent besides the text. Taking a message
 * apart (attachments, voice) and sending the answer back (deliver, reply files, typing progress). It
 * may use turn (a failure's notice) and policy (the sandbox's queued sends).
 */
export { takeAttachments } from './reply-files.js';
export { takeApart } from './take-apart.js';
