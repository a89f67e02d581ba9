#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createNotifierProgram } from './program.js';

await main(createNotifierProgram);
