#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createWebProgram } from './program.js';

await main(createWebProgram);
