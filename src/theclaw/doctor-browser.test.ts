import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CHROMIUM } from '../browser/index.js';
import { createTestHome, type TestHome } from '../testing/index.js';
import { doctor } from './doctor.js';

// doctor's browser check: chromium there or not (optional, so a warning at most).

let t: TestHome;
beforeEach(() => {
  t = createTestHome();
});
afterEach(() => t.cleanup());

const browserCheck = async (chromium: string | null) => (await doctor(t.home, t.env, Date.now(), { offline: true, bwrap: null, chromium })).filter((check) => check.name === 'browser');

describe('theclaw doctor: browser', () => {
  it('says which chromium the browsers run, and warns with the install command where it is missing', async () => {
    expect(await browserCheck(CHROMIUM)).toEqual([{ name: 'browser', status: 'ok', detail: `agents' browsers run ${CHROMIUM}` }]);
    expect(await browserCheck(null)).toEqual([
      { name: 'browser', status: 'warn', detail: `chromium is not installed (${CHROMIUM}): an agent's browser commands fail`, fix: 'apt-get install chromium' },
    ]);
  });
});
