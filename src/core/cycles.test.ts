import { describe, expect, it } from 'vitest';
import { describeCycle, importCycles } from '../testing/import-cycles.js';
import { sourceFiles } from '../testing/source-imports.js';

/**
 * No module under src/ imports itself around a circle (static or dynamic imports): a circle means
 * two modules that cannot be read, tested or loaded one without the other, and the lower one
 * should own what both need.
 */

describe('importCycles', () => {
  const files = (sources: Record<string, string>) => new Map(Object.entries(sources));

  it('finds a circle through static, dynamic and re-exporting imports, with its way around', () => {
    const cycles = importCycles(
      files({
        'src/x/a.ts': "import { b } from './b.js';",
        'src/x/b.ts': "export * from '../y/c.js';",
        'src/y/c.ts': "const a = () => import('../x/a.js');\nimport { d } from './d.js';",
        'src/y/d.ts': "import { z } from 'zod';",
      }),
    );
    expect(cycles.map(describeCycle)).toEqual(['x/a → x/b → y/c → x/a']);
  });

  it('names every module of a circle, and a module importing itself', () => {
    const cycles = importCycles(
      files({
        'src/x/a.ts': "import './b.js';\nimport './c.js';",
        'src/x/b.ts': "import './a.js';",
        'src/x/c.ts': "import './b.js';",
        'src/x/d.ts': "import './d.js';",
      }),
    );
    expect(cycles).toEqual([
      { modules: ['src/x/a.ts', 'src/x/b.ts', 'src/x/c.ts'], path: ['src/x/a.ts', 'src/x/b.ts', 'src/x/a.ts'] },
      { modules: ['src/x/d.ts'], path: ['src/x/d.ts', 'src/x/d.ts'] },
    ]);
  });

  it('finds none where imports only point down, and ignores packages and what is not a module here', () => {
    expect(importCycles(files({ 'src/x/a.ts': "import './b.js';\nimport 'node:fs';", 'src/x/b.ts': "import '../y/gone.js';\n// import './a.js';" }))).toEqual([]);
  });
});

describe('the modules under src/', () => {
  it('import one another without circles', () => {
    const found = importCycles(sourceFiles()).map(describeCycle);
    expect(found, `${found.length} import circles - move what both sides need to the lower module:\n${found.join('\n')}\n`).toEqual([]);
  });
});
