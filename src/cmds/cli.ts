#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createCmdsProgram } from './program.js';

await main(createCmdsProgram);
