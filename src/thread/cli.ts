#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createThreadProgram } from './program.js';

await main(createThreadProgram);
