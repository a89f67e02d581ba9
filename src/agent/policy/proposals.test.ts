import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, runTool, type TestHome } from '../../testing/index.js';
import { openThread } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { initAgent } from '../lifecycle.js';
import { createProposal, decideProposal, describeOutcome, findProposal, pendingProposals, proposalDecision, readProposal } from './proposals.js';

let t: TestHome;
let dir: AgentDir;

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  writeFileSync(dir.identity, '# helper\n\nI help.\n');
});

afterEach(() => t.cleanup());

const changes = () => {
  const feed = openThread(join(t.home, 'feeds', 'proposals'), { home: t.home });
  try {
    return feed.peek().map((event) => JSON.parse(event.content));
  } finally {
    feed.close();
  }
};

describe('proposals', () => {
  it('are one file to read, with the summary, the diff and the new text, and nothing changes until decided', () => {
    const proposal = createProposal(dir, { file: 'IDENTITY.md', summary: 'Say who asks.', text: '# helper\n\nI help, and I say who asks.' });
    const file = join(dir.root, 'proposals', `${proposal.code}.md`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const body = readFileSync(file, 'utf8');
    expect(body).toContain(`# Proposal ${proposal.code}: helper's IDENTITY.md (+1 -1 lines)\n\nSay who asks.\n`);
    expect(body).toContain('```diff\n@@ -1,3 +1,3 @@\n # helper\n \n-I help.\n+I help, and I say who asks.\n```');
    expect(readProposal(dir, proposal.code.toUpperCase())).toEqual({ ...proposal, text: '# helper\n\nI help, and I say who asks.\n' });
    expect(pendingProposals(dir).map((p) => p.code)).toEqual([proposal.code]);
    expect(findProposal(t.home, proposal.code)?.dir.id).toBe('helper');
    expect(readFileSync(dir.identity, 'utf8')).toBe('# helper\n\nI help.\n');
  });

  it('applied: the new text is written, the old one kept, the change recorded; the first decision counts', async () => {
    const proposal = createProposal(dir, { file: 'IDENTITY.md', summary: 'x', text: '# helper\n\nNew.\n' });
    const outcome = decideProposal(t.home, dir, proposal, true, 'the owner');
    await outcome.recorded;
    expect(outcome).toMatchObject({ mine: true, decision: { outcome: 'applied', by: 'the owner' } });
    expect(readFileSync(dir.identity, 'utf8')).toBe('# helper\n\nNew.\n');
    expect(readFileSync(outcome.before, 'utf8')).toBe('# helper\n\nI help.\n');
    expect(describeOutcome(outcome, t.home)).toBe(`Applied: helper's IDENTITY.md (+1 -1 lines). The file as it was is kept in agents/helper/proposals/${proposal.code}.before.md.`);
    expect(changes()).toEqual([{ agent: 'helper', code: proposal.code, file: 'IDENTITY.md', outcome: 'applied', by: 'the owner', before: outcome.before }]);
    expect(pendingProposals(dir)).toEqual([]);

    const again = decideProposal(t.home, dir, proposal, false, 'someone else');
    await again.recorded;
    expect(again).toMatchObject({ mine: false, decision: { outcome: 'applied' } });
    expect(describeOutcome(again, t.home)).toBe(`Proposal ${proposal.code} (helper's IDENTITY.md) was applied before, by the owner.`);
    expect(changes()).toHaveLength(1);
  });

  it('rejected: the file stays as it is', () => {
    const proposal = createProposal(dir, { file: 'memory/agent.md', summary: 'x', text: 'Notes.\n' });
    const outcome = decideProposal(t.home, dir, proposal, false, 'the owner');
    expect(describeOutcome(outcome, t.home)).toBe(`Dropped: proposal ${proposal.code} (helper's memory/agent.md); the file is unchanged.`);
    expect(() => readFileSync(join(dir.memory, 'agent.md'))).toThrow(/ENOENT/);
    expect(proposalDecision(dir, proposal.code)?.outcome).toBe('rejected');
  });

  it('agent approvals lists a proposal, agent approve applies it, and a second decision is refused', async () => {
    const proposal = createProposal(dir, { file: 'IDENTITY.md', summary: 'Say who asks.', text: '# helper\n\nNew.\n' });
    const listed = await runTool('agent', ['approvals', 'helper'], t.env);
    expect(listed.stdout).toBe(`${proposal.code}  proposal  IDENTITY.md (+1 -1)  Say who asks.  (${join(dir.root, 'proposals', `${proposal.code}.md`)})\n`);
    const approved = await runTool('agent', ['approve', 'helper', proposal.code], t.env);
    expect(approved).toMatchObject({ code: 0, stdout: `Applied: helper's IDENTITY.md (+1 -1 lines). The file as it was is kept in agents/helper/proposals/${proposal.code}.before.md.\n` });
    expect(readFileSync(dir.identity, 'utf8')).toBe('# helper\n\nNew.\n');
    const again = await runTool('agent', ['deny', 'helper', proposal.code], t.env);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toBe(`Error: proposal ${proposal.code} was applied already, by the owner (agent approve|deny) - nothing to do\n`);
  });

  it('stale: a file that changed since the proposal is not overwritten', () => {
    const proposal = createProposal(dir, { file: 'IDENTITY.md', summary: 'x', text: 'New.\n' });
    writeFileSync(dir.identity, '# helper\n\nThe owner edited this.\n');
    const outcome = decideProposal(t.home, dir, proposal, true, 'the owner');
    expect(outcome.decision.outcome).toBe('stale');
    expect(readFileSync(dir.identity, 'utf8')).toBe('# helper\n\nThe owner edited this.\n');
  });

  it('a decider that died after deciding and before writing: the next decision of the code completes it', async () => {
    const proposal = createProposal(dir, { file: 'IDENTITY.md', summary: 'x', text: 'New.\n' });
    writeFileSync(join(dir.root, 'proposals', `${proposal.code}.decision.json`), JSON.stringify({ outcome: 'applied', by: 'the owner', at: new Date().toISOString() }));
    const outcome = decideProposal(t.home, dir, proposal, true, 'the owner again');
    await outcome.recorded;
    expect(outcome.mine).toBe(false);
    expect(readFileSync(dir.identity, 'utf8')).toBe('New.\n');
    expect(changes()).toHaveLength(1);
  });
});
