#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createTheclawProgram } from './program.js';

await main(createTheclawProgram);
