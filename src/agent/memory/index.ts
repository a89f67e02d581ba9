/**
 * The memory room: the agent's Markdown memory on disk (daily notes, archive, the versions of a
 * file), its caps in the prompt, and the search index over memory and conversations (chunks,
 * embeddings, ranking). It stands on src/agent's shared modules alone: nothing here knows of a turn,
 * a reply or a policy.
 */
export { capMemory, recordTruncations } from './memory-caps.js';
export { EMBEDDINGS_SOCKET_ENV } from './memory-embedder.js';
export { MEMORY_SOCKET_ENV, type MemoryDoors } from './memory-door.js';
export { appendNewLines, ARCHIVE_DIR, archiveFolder, dailyFolder, fileStamp, memoryVersion, readMemoryFile, readMemoryOrEmpty, warnRefused, writeSummary } from './memory-store.js';
