// The Vercel AI SDK 6 against the Salesforce integration: MockLanguageModelV3 plays the
// support-desk flow on Salesforce objects through two tools written with jsforce, as a Vercel
// user writes them (`tool({ inputSchema, execute })`): a SOQL query and a record create. The
// agent logs in with jsforce's OAuth2 username-password flow, `loginUrl` at the attempt's base
// URL of the `crm` integration (UNDERSTUDY_URL_CRM).
//
// `node run_vercel_ai_salesforce.mjs SCRIPT` under `understudy test -- …` (jsforce from
// JSFORCE_DIR); `playSalesforce(SCRIPT, env, jsforceDir)`: used by clients/js/test/agents.vitest.test.ts under
// the TypeScript helper. jsforce comes from `jsforceDir` (a folder whose node_modules has it;
// .ci/run installs it under target/jsforce).
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { argv } from 'node:process';
import { fileURLToPath } from 'node:url';

export const CONTRACT = 'create_case_contract';
const C = `contract:${CONTRACT}:`;
const CONTACT_SOQL = "SELECT Id, FirstName, LastName, Email FROM Contact WHERE Email = 'ada@example.com'";
const caseSoql = (id) => `SELECT Id, Status, ContactId, Subject FROM Case WHERE Id = '${id}'`;

function contactId(results) {
  for (const r of results) {
    if (r.tool === 'salesforce_query' && !r.error) {
      const v = JSON.parse(r.text);
      if (v.records?.[0]?.attributes?.type === 'Contact') return v.records[0].Id;
    }
  }
  throw new Error(`no Contact lookup among ${JSON.stringify(results)}`);
}
function caseId(results) {
  for (const r of [...results].reverse()) {
    if (r.tool === 'salesforce_create' && !r.error) {
      const v = JSON.parse(r.text);
      if (v.success && v.id) return v.id;
    }
  }
  return 'none';
}
const lookup = () => ({ tool: 'salesforce_query', args: { soql: CONTACT_SOQL } });
const create = (cid) => (r) => ({ tool: 'salesforce_create',
  args: { object_name: 'Case', record: { ContactId: cid ?? contactId(r), Subject: 'Refund for order 7' } } });
const readBack = (r) => ({ tool: 'salesforce_query', args: { soql: caseSoql(caseId(r)) } });

// script → [steps, the reason code the verdict must name (null: it passes)]
export const SCRIPTS = {
  good: [[lookup, create(), readBack], null],
  write_before_lookup: [[create('003Hp00000Ab12CAAR'), lookup, readBack],
    `${C}preconditions.required_before[crm/lookup_contact]`],
  invented_argument: [[lookup, create('003Hp00000Zz99ZAAZ'), readBack], `${C}arguments.sources[ContactId]`],
};

function resultsOf(prompt) {
  const out = [];
  for (const m of prompt) {
    if (m.role !== 'tool') continue;
    for (const p of m.content) {
      if (p.type !== 'tool-result') continue;
      const o = p.output ?? {};
      out.push({ tool: p.toolName, error: String(o.type ?? '').startsWith('error'),
        text: typeof o.value === 'string' ? o.value : JSON.stringify(o.value) });
    }
  }
  return out;
}

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** The two jsforce tools an agent gets. */
export function salesforceTools(conn) {
  return {
    salesforce_query: tool({
      description: 'Run a SOQL query against Salesforce',
      inputSchema: jsonSchema({ type: 'object', required: ['soql'], properties: { soql: { type: 'string' } } }),
      execute: async ({ soql }) => conn.query(soql),
    }),
    salesforce_create: tool({
      description: 'Create a Salesforce record',
      inputSchema: jsonSchema({ type: 'object', required: ['object_name', 'record'],
        properties: { object_name: { type: 'string' }, record: { type: 'object' } } }),
      execute: async ({ object_name, record }) => conn.sobject(object_name).create(record),
    }),
  };
}

/**
 * Plays script `name` against the attempt `env` names (UNDERSTUDY_URL_CRM, UNDERSTUDY_URL,
 * UNDERSTUDY_ATTEMPT, UNDERSTUDY_ATTEMPT_ID); posts "done" as an agent event; resolves to
 * `{ final, error }`.
 */
export async function playSalesforce(name, env, jsforceDir) {
  const [steps] = SCRIPTS[name];
  const jsforce = createRequire(jsforceDir.replace(/\/?$/, '/'))('jsforce');
  let n = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      const results = resultsOf(options.prompt);
      n += 1;
      if (results.length >= steps.length) {
        return { content: [{ type: 'text', text: 'done: case opened' }],
          finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
      }
      const next = steps[results.length](results);
      return { content: [{ type: 'tool-call', toolCallId: `call_${n}`, toolName: next.tool, input: JSON.stringify(next.args) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] };
    },
  });
  const conn = new jsforce.Connection({
    oauth2: { loginUrl: env.UNDERSTUDY_URL_CRM, clientId: 'desk-agent', clientSecret: 'not-a-real-secret' },
    version: '59.0',
  });
  await conn.login('agent@desk.example', 'not-a-real-password');
  const r = await generateText({ model, tools: salesforceTools(conn), stopWhen: stepCountIs(10),
    prompt: 'Open a case for ada@example.com: refund for order 7' });
  if (r.text.startsWith('done')) {
    const res = await fetch(`${env.UNDERSTUDY_URL.replace(/\/$/, '')}/_understudy/api/attempts/${env.UNDERSTUDY_ATTEMPT_ID}/events`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'Understudy-Attempt': env.UNDERSTUDY_ATTEMPT },
      body: JSON.stringify({ name: 'told_customer_done', kind: 'agent_message', text: r.text }) });
    if (res.status !== 201) throw new Error(`event answered ${res.status}`);
  }
  return { final: r.text };
}

if (argv[1] && resolve(argv[1]) === fileURLToPath(import.meta.url)) {
  if (!SCRIPTS[argv[2]] || !process.env.JSFORCE_DIR) {
    console.error(`usage: JSFORCE_DIR=DIR run_vercel_ai_salesforce.mjs ${Object.keys(SCRIPTS).join('|')}`);
    process.exit(2);
  }
  let outcome;
  try {
    outcome = { ...(await playSalesforce(argv[2], process.env, process.env.JSFORCE_DIR)), error: null };
  } catch (e) {
    outcome = { final: null, error: `${e?.name ?? 'Error'}: ${e?.message ?? e}`.slice(0, 300) };
  }
  console.log('AGENT-OUTCOME ' + JSON.stringify({ framework: 'vercel-ai', script: `salesforce-${argv[2]}`, ...outcome }));
}
