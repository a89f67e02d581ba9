#!/usr/bin/env node
import { runCli } from '../core/cli.js';
import { createNotifierProgram } from './program.js';

await runCli(createNotifierProgram());
