export {
  catalogEntries,
  describeEntry,
  entryToJson,
  findEntries,
  infoToJson,
  listEntries,
  loadCatalog,
  DEFAULT_FIND_LIMIT,
  SKILL_BODY_LIMIT,
  type Catalog,
  type CatalogSeams,
  type FindOptions,
  type ListOptions,
  type ListResult,
  type LoadOptions,
} from './catalog.js';
export { formatFind, formatInfo, formatList, truncateLine, type TextMode } from './format.js';
export { indexProgram, loadOwnCommands, renderOwnCommands } from './own-commands.js';
export { aproposDescriptions, loadPathIndex, parseApropos, pathDirs, type DescriptionReader } from './path.js';
export { compareEntries, matchEntry, normalizeQuery, queryWords, rankEntries, stem, tokenize, type Match, type Tier } from './rank.js';
export { loadSkills, parseSkill, skillRoots, type ParsedSkill } from './skills.js';
export { WELL_KNOWN, wellKnownDescription } from './well-known.js';
export { createCmdsProgram } from './program.js';
export * from './types.js';
