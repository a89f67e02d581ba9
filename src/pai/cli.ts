#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createPaiProgram } from './program.js';

await main(createPaiProgram);
