#!/usr/bin/env node
import { runCli } from '../core/cli.js';
import { createPaiProgram } from './program.js';

await runCli(createPaiProgram());
