/**
 * A unified diff of two texts by lines (`diff -u`'s format, 3 lines of context), for a person to
 * read what a change does before approving it. The longest common subsequence by dynamic
 * programming: O(lines²) time and memory, for files of a few hundred lines (an identity, a memory
 * file), never a large one.
 */
export interface LineDiff {
  /** The hunks, `@@ -a,b +c,d @@` headed; empty when the texts are the same. */
  text: string;
  added: number;
  removed: number;
}

const CONTEXT = 3;

type Op = { kind: ' ' | '-' | '+'; line: string };

export function lineDiff(before: string, after: string): LineDiff {
  const ops = editScript(lines(before), lines(after));
  const added = ops.filter((op) => op.kind === '+').length;
  const removed = ops.filter((op) => op.kind === '-').length;
  return { text: hunks(ops).join('\n'), added, removed };
}

function lines(text: string): string[] {
  if (text === '') return [];
  const split = text.split('\n');
  if (split.at(-1) === '') split.pop(); // a final newline ends the last line, it does not start one
  return split;
}

function editScript(a: string[], b: string[]): Op[] {
  // common[i][j]: the longest common subsequence of a[i..] and b[j..].
  const width = b.length + 1;
  const common = new Uint32Array((a.length + 1) * width);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i * width + j] = a[i] === b[j] ? common[(i + 1) * width + j + 1]! + 1 : Math.max(common[(i + 1) * width + j]!, common[i * width + j + 1]!);
    }
  }
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      ops.push({ kind: ' ', line: a[i++]! });
      j++;
    } else if (j < b.length && (i === a.length || common[i * width + j + 1]! >= common[(i + 1) * width + j]!)) {
      ops.push({ kind: '+', line: b[j++]! });
    } else {
      ops.push({ kind: '-', line: a[i++]! });
    }
  }
  // Removals before additions within a change, as diff -u shows them.
  for (let k = 1; k < ops.length; k++) {
    for (let m = k; m > 0 && ops[m]!.kind === '-' && ops[m - 1]!.kind === '+'; m--) [ops[m - 1], ops[m]] = [ops[m]!, ops[m - 1]!];
  }
  return ops;
}

function hunks(ops: Op[]): string[] {
  const out: string[] = [];
  const changed = ops.flatMap((op, index) => (op.kind === ' ' ? [] : [index]));
  // A hunk runs from CONTEXT lines before a change to CONTEXT lines after the last change that
  // is within 2 × CONTEXT lines of the one before it.
  const groups: [number, number][] = [];
  for (let g = 0; g < changed.length; ) {
    const first = changed[g]!;
    let last = first;
    while (g + 1 < changed.length && changed[g + 1]! - last <= 2 * CONTEXT) last = changed[++g]!;
    groups.push([Math.max(0, first - CONTEXT), Math.min(ops.length - 1, last + CONTEXT)]);
    g++;
  }
  let aLine = 1;
  let bLine = 1;
  let at = 0;
  for (const [from, to] of groups) {
    for (; at < from; at++) {
      if (ops[at]!.kind !== '+') aLine++;
      if (ops[at]!.kind !== '-') bLine++;
    }
    const body = ops.slice(from, to + 1);
    const aCount = body.filter((op) => op.kind !== '+').length;
    const bCount = body.filter((op) => op.kind !== '-').length;
    out.push(`@@ -${aCount === 0 ? aLine - 1 : aLine},${aCount} +${bCount === 0 ? bLine - 1 : bLine},${bCount} @@`, ...body.map((op) => op.kind + op.line));
    for (; at <= to; at++) {
      if (ops[at]!.kind !== '+') aLine++;
      if (ops[at]!.kind !== '-') bLine++;
    }
  }
  return out;
}
