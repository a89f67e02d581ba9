import { importedPath, importsOf } from './source-imports.js';

/** Modules that import each other, directly or around a circle. */
export interface ImportCycle {
  /** Every module of the circle (a strongly connected component of the import graph), sorted. */
  modules: string[];
  /** One way around it, from its first module back to that module. */
  path: string[];
}

/** The import cycles among `files` (repository path → source), static and dynamic imports alike, sorted. */
export function importCycles(files: ReadonlyMap<string, string>): ImportCycle[] {
  const edges = new Map<string, string[]>();
  for (const [file, source] of files) {
    const targets = importsOf(source).flatMap(({ specifier }) => importedPath(file, specifier) ?? []);
    edges.set(file, [...new Set(targets.filter((target) => files.has(target)))].sort());
  }
  return components(edges)
    .filter((component) => component.length > 1 || edges.get(component[0]!)!.includes(component[0]!))
    .map((modules) => ({ modules, path: cycleThrough(new Set(modules), edges) }))
    .sort((a, b) => (a.modules[0]! < b.modules[0]! ? -1 : 1));
}

/** `core/a → core/b → core/a`, and the circle's other modules after it. */
export function describeCycle({ modules, path }: ImportCycle): string {
  const short = (module: string) => module.replace(/^src\//, '').replace(/\.ts$/, '');
  const others = modules.filter((module) => !path.includes(module));
  return path.map(short).join(' → ') + (others.length > 0 ? ` (with ${others.map(short).join(', ')})` : '');
}

/** Tarjan's strongly connected components, iteratively (the graph is deep enough to matter). */
function components(edges: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  for (const start of [...edges.keys()].sort()) {
    if (index.has(start)) continue;
    const work: { node: string; next: number }[] = [{ node: start, next: 0 }];
    index.set(start, index.size);
    low.set(start, index.get(start)!);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work.at(-1)!;
      const targets = edges.get(frame.node)!;
      if (frame.next < targets.length) {
        const target = targets[frame.next++]!;
        if (!index.has(target)) {
          index.set(target, index.size);
          low.set(target, index.get(target)!);
          stack.push(target);
          onStack.add(target);
          work.push({ node: target, next: 0 });
        } else if (onStack.has(target)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(target)!));
        }
        continue;
      }
      work.pop();
      const parent = work.at(-1);
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!));
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        found.push(component.sort());
      }
    }
  }
  return found;
}

/** A shortest cycle from the component's first module back to it, staying inside the component. */
function cycleThrough(component: ReadonlySet<string>, edges: ReadonlyMap<string, readonly string[]>): string[] {
  const start = [...component].sort()[0]!;
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const target of edges.get(node)!) {
      if (!component.has(target)) continue;
      if (target === start) {
        const path = [start];
        for (let at = node; at !== start; at = previous.get(at)!) path.splice(1, 0, at);
        return [...path, start];
      }
      if (!previous.has(target)) {
        previous.set(target, node);
        queue.push(target);
      }
    }
  }
  throw new Error(`${start} is in no cycle`);
}
