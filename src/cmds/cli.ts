#!/usr/bin/env node
import { runCli } from '../core/cli.js';
import { createCmdsProgram } from './program.js';

await runCli(createCmdsProgram());
