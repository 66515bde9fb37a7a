// The cases both runners play: `t` is the runner's {test, expect, afterAll}; `lib` the package
// as that runner loads it (ESM under vitest, CJS under Jest).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { CONFIG, book, lookupWithHeader } = require('./agent.cjs');

const CONTRACT = 'book_appointment_contract';
const REQUIRED_BEFORE = `contract:${CONTRACT}:preconditions.required_before[crm/lookup_contact_by_phone]`;

module.exports = function suite({ test, expect, afterAll }, lib, runner) {
  const reportDir = fs.mkdtempSync(path.join(os.tmpdir(), `understudy-js-${runner}-`));
  const opts = { config: CONFIG, reportDir, contracts: [CONTRACT] };
  afterAll(() => lib.disconnect());

  test('a well-behaved agent passes, and the reports are written', async () => {
    const { evidence: env } = await lib.withAttempt(`${runner}-good`, opts, (a) => book(a));
    expect(env.verdict).toBe('pass');
    for (const ext of ['json', 'xml', 'html']) {
      expect(fs.existsSync(path.join(reportDir, `${runner}-good.${ext}`))).toBe(true);
    }
    expect(fs.readFileSync(path.join(reportDir, `${runner}-good.xml`), 'utf8')).toContain('<testsuite');
  });

  test('a write before the lookup fails the test with the verdict\'s reasons', async () => {
    let caught;
    try {
      await lib.withAttempt(`${runner}-no-lookup`, opts, (a) => book(a, { lookup: false, contact: '003Hp00000Ab12CAAR' }));
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(lib.VerdictError);
    expect(caught.reasons.map((r) => r.code)).toContain(REQUIRED_BEFORE);
    expect(caught.message).toContain(REQUIRED_BEFORE);
    const env = JSON.parse(fs.readFileSync(path.join(reportDir, `${runner}-no-lookup.json`), 'utf8'));
    expect(env.verdict).toBe('fail');
  });

  test('the plain URL with the attempt header lands in the attempt; the env names it', async () => {
    const server = await lib.connect(opts);
    const a = await server.attempt({ expectCalls: true });
    await lookupWithHeader(a);
    const env = await a.evidence();
    expect(env.tool_events.map((e) => e.operation_id)).toEqual(['lookup_contact_by_phone']);
    expect(a.env.UNDERSTUDY_URL_CRM).toBe(a.baseUrl('crm'));
    expect(a.env.UNDERSTUDY_ATTEMPT).toBe(a.token);
    expect(a.mcpUrl('crm')).toBe(`${server.url}/crm`);
    expect(() => a.baseUrl('nope')).toThrow(/no integration "nope"/);
    await a.finish(`${runner}-header`);
  });

  test('nothing happened is a failure, never a pass', async () => {
    let caught;
    try {
      await lib.withAttempt(`${runner}-nothing`, { ...opts, contracts: [] }, async () => {});
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(lib.VerdictError);
    expect(caught.reasons.map((r) => r.code)).toContain('no_calls');
  });
};
