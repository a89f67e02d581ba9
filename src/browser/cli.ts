#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createBrowserProgram } from './program.js';

await main(createBrowserProgram);
