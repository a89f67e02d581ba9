// The parts of @ericcornelissen/bash-parser's AST that shell-commands.ts reads; the package ships no types.
declare module '@ericcornelissen/bash-parser' {
  interface BashNode {
    type: string;
    [key: string]: unknown;
  }
  /** `insertLOC`: each node gets `loc: { start: { char }, end: { char } }`, offsets in the source (not in a substitution's). */
  export default function parse(source: string, options?: { mode?: 'bash' | 'posix'; insertLOC?: boolean }): BashNode;
}
