#!/usr/bin/env node
import { warmLoading } from '../core/warm-loader.js';
import { fetchThroughService } from './fetch-client.js';

// A plain `web fetch` with a warm service at hand is sent there, without loading the CLI (fetch-client.ts).
if (warmLoading() || !(await fetchThroughService(process.argv, process.env))) {
  const [{ main }, { createWebProgram }] = await Promise.all([import('../core/cli.js'), import('./program.js')]);
  await main(createWebProgram);
}
