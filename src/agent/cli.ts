#!/usr/bin/env node
import { runCli } from '../core/cli.js';
import { createAgentProgram } from './program.js';

await runCli(createAgentProgram());
