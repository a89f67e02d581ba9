#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createXgwProgram } from './program.js';

await main(createXgwProgram);
