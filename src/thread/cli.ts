#!/usr/bin/env node
import { runCli } from '../core/cli.js';
import { createThreadProgram } from './program.js';

await runCli(createThreadProgram());
