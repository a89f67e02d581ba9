// The parts of @ericcornelissen/bash-parser's AST that shell-commands.ts reads; the package ships no types.
declare module '@ericcornelissen/bash-parser' {
  interface BashNode {
    type: string;
    [key: string]: unknown;
  }
  export default function parse(source: string, options?: { mode?: 'bash' | 'posix' }): BashNode;
}
