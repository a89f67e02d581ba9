#!/usr/bin/env node
import { runCli } from '../core/cli.js';
import { createXgwProgram } from './program.js';

await runCli(createXgwProgram());
