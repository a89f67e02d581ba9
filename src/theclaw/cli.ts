#!/usr/bin/env node
import { runCli } from '../core/cli.js';
import { createTheclawProgram } from './program.js';

await runCli(createTheclawProgram());
