// turndown's browser build (see src/core/html-markdown.ts): the same API as the package's main entry.
declare module 'turndown/lib/turndown.browser.cjs.js' {
  import TurndownService from 'turndown';
  export default TurndownService;
}
