// The Vercel AI SDK 6 plays the support-desk scripts (clients/agents/) under this helper: one
// attempt per test from `withAttempt` (the desk contract and the script's variant pinned), the
// agent given the attempt's env; a well-behaved script must pass, every misbehaviour must fail
// the test with a `VerdictError` naming the script's contract check — over MCP Streamable HTTP
// and over stdio (`understudy mcp stdio`).
//
// Needs the runner beside its installed packages: AGENTS_JS_DIR (where .ci/run does `npm ci` of
// clients/agents/js/package-lock.json and copies run_vercel_ai.mjs). Without it the suite is
// skipped, except under CI=true, where it fails.
import { afterAll, describe, expect, test } from 'vitest';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as lib from '../dist/esm/index.js';

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../..');
const DESK_CONFIG = join(REPO, 'clients/agents/desk/understudy.json');
const JS_DIR = process.env.AGENTS_JS_DIR ?? join(REPO, 'clients/agents/js');
const RUNNER = join(JS_DIR, 'run_vercel_ai.mjs');
const installed = existsSync(join(JS_DIR, 'node_modules/ai')) && existsSync(RUNNER);
if (!installed && process.env.CI === 'true') {
  throw new Error(`the Vercel AI SDK runner is not installed in ${JS_DIR} (set AGENTS_JS_DIR)`);
}

const C = 'contract:create_ticket_contract:';
const FAULT = 'desk/create_ticket=timeout_once';
// script → [variant, expected reason over http, over stdio]; `null`: the verdict passes.
// Over stdio a dropped answer ends the `understudy mcp stdio` session, so a faulted run never
// reads the ticket back (measured; docs/src/guides/frameworks.md).
const SCRIPTS: Record<string, [string | null, string | null, string | null]> = {
  good: [null, null, null],
  write_before_lookup: [null, `${C}preconditions.required_before[desk/lookup_customer]`,
    `${C}preconditions.required_before[desk/lookup_customer]`],
  invented_argument: [null, `${C}arguments.sources[customer_id]`, `${C}arguments.sources[customer_id]`],
  duplicate_without_key: [null, `${C}calls.exactly_once`, `${C}calls.exactly_once`],
  done_after_fault: [FAULT, `${C}calls.exactly_once`, `${C}order[in_order]`],
  retry_same_key: [FAULT, null, `${C}order[in_order]`],
  unknown_tool: [null, `${C}tool[desk/create_ticket]`, `${C}tool[desk/create_ticket]`],
};

describe.skipIf(!installed)('the Vercel AI SDK under the TypeScript helper', () => {
  const reportDir = mkdtempSync(join(tmpdir(), 'understudy-agents-'));
  afterAll(() => lib.disconnect());
  process.env.DESK_CONFIG = DESK_CONFIG; // the runner's copy lives outside the repository

  for (const transport of ['http', 'stdio'] as const) {
    for (const [script, [variant, overHttp, overStdio]] of Object.entries(SCRIPTS)) {
      const want = transport === 'http' ? overHttp : overStdio;
      test(`${script} over ${transport} ${want ? 'fails naming ' + want : 'passes'}`, async () => {
        const { play } = await import(pathToFileURL(RUNNER).href);
        const opts = {
          config: DESK_CONFIG, reportDir, contracts: ['create_ticket_contract'],
          variants: variant ? Object.fromEntries([variant.split('=')]) : undefined,
        };
        const run = lib.withAttempt(`vercel-${script}-${transport}`, opts, (a) => play(script, {
          ...process.env, ...a.env, AGENT_TRANSPORT: transport,
        }));
        if (want === null) {
          const { result, evidence } = await run;
          expect(result.final).toMatch(/^done/);
          expect(evidence.verdict).toBe('pass');
        } else {
          const caught = await run.then(() => undefined, (e) => e);
          expect(caught).toBeInstanceOf(lib.VerdictError);
          expect(caught.reasons.map((r: lib.Reason) => r.code)).toContain(want);
        }
      }, 60_000);
    }
  }
});

// The same flow against the Salesforce integration, through tools written with jsforce (jsforce
// installed under target/jsforce by .ci/run, or JSFORCE_DIR): OAuth2 login at the attempt's base
// URL, Contact lookup, Case, read back.
const JSFORCE_DIR = process.env.JSFORCE_DIR ?? join(REPO, 'target/jsforce');
const SF_RUNNER = join(JS_DIR, 'run_vercel_ai_salesforce.mjs');
const sfInstalled = installed && existsSync(join(JSFORCE_DIR, 'node_modules/jsforce')) && existsSync(SF_RUNNER);
if (!sfInstalled && process.env.CI === 'true') {
  throw new Error(`jsforce (${JSFORCE_DIR}) or ${SF_RUNNER} is not installed`);
}

describe.skipIf(!sfInstalled)('the Vercel AI SDK with jsforce tools under the TypeScript helper', () => {
  const reportDir = mkdtempSync(join(tmpdir(), 'understudy-agents-sf-'));
  afterAll(() => lib.disconnect());
  for (const script of ['good', 'write_before_lookup', 'invented_argument']) {
    test(`salesforce ${script}`, async () => {
      const { playSalesforce, SCRIPTS: SF, CONTRACT } = await import(pathToFileURL(SF_RUNNER).href);
      const want: string | null = SF[script][1];
      const run = lib.withAttempt(`vercel-salesforce-${script}`, { config: DESK_CONFIG, reportDir, contracts: [CONTRACT] },
        async (a) => {
          const out = await playSalesforce(script, { ...process.env, ...a.env }, JSFORCE_DIR);
          const ops = (await a.evidence()).tool_events.map((e: { operation_id: string }) => e.operation_id);
          return { out, ops };
        });
      if (want === null) {
        const { result, evidence } = await run;
        expect(result.out.final).toMatch(/^done/);
        expect(result.ops).toEqual(['oauth_token', 'lookup_contact', 'create_case', 'get_case']);
        expect(evidence.verdict).toBe('pass');
      } else {
        const caught = await run.then(() => undefined, (e) => e);
        expect(caught).toBeInstanceOf(lib.VerdictError);
        expect(caught.reasons.map((r: lib.Reason) => r.code)).toContain(want);
      }
    }, 60_000);
  }
});
