#!/usr/bin/env node
import { main } from '../core/cli.js';
import { createAgentProgram } from './program.js';

await main(createAgentProgram);
