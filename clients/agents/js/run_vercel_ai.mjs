// The Vercel AI SDK 6: MockLanguageModelV3 (ai/test) plays the support-desk script; createMCPClient
// (@ai-sdk/mcp) reaches the desk over MCP Streamable HTTP with the attempt header.
// `node run_vercel_ai.mjs SCRIPT` — the same scripts as clients/agents/python/desk_scripts.py.
// `play(SCRIPT, env)` is the same run from a test (clients/js/test/agents.vitest.test.ts gives it
// the env of an attempt the TypeScript helper created).
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { createMCPClient } from '@ai-sdk/mcp';
import { Experimental_StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';
import { fileURLToPath } from 'node:url';
import { dirname, resolve } from 'node:path';
import { argv } from 'node:process';

// The desk project: beside this file in the repository, or DESK_CONFIG (a copy of the runner
// installed elsewhere).
const DESK_CONFIG = process.env.DESK_CONFIG ?? resolve(dirname(fileURLToPath(import.meta.url)), '../desk/understudy.json');

const EMAIL = 'ada@example.com';
const SUBJECT = 'Refund for order 7';

function customerId(results) {
  for (const r of results) {
    if (r.tool === 'lookup_customer' && !r.error) {
      let data = JSON.parse(r.text);
      for (let i = 0; i < 4; i++) {
        if (Array.isArray(data) && data.length) data = data[0];
        else if (data && typeof data === 'object' && !('customer' in data) && 'text' in data) data = JSON.parse(data.text);
        else if (data && typeof data === 'object' && !('customer' in data) && Array.isArray(data.content)) data = data.content;
        else break;
      }
      return data.customer.id;
    }
  }
  throw new Error(`no lookup result among ${JSON.stringify(results)}`);
}
function ticketId(results) {
  for (const r of [...results].reverse()) {
    if (r.tool === 'create_ticket' && !r.error) {
      try { const v = JSON.parse(r.text); if (v.ticket_id) return v.ticket_id; if (v.structuredContent) return v.structuredContent.ticket_id; } catch { /* not JSON */ }
    }
  }
  return 'T-1';
}
const lookup = () => ({ tool: 'lookup_customer', args: { email: EMAIL } });
const create = (key, cid) => (r) => {
  const args = { customer_id: cid ?? customerId(r), subject: SUBJECT };
  if (key !== null) args.idempotency_key = key;
  return { tool: 'create_ticket', args };
};
const readBack = (r) => ({ tool: 'get_ticket', args: { ticket_id: ticketId(r) } });

export const SCRIPTS = {
  good: [lookup, create('key-1'), readBack],
  write_before_lookup: [create('key-1', 'CUS-1042'), lookup, readBack],
  invented_argument: [lookup, create('key-1', 'CUS-9999'), readBack],
  duplicate_without_key: [lookup, create(null), create(null), readBack],
  done_after_fault: [lookup, create(null), create('fresh-key'), readBack],
  retry_same_key: [lookup, create('key-1'), create('key-1'), readBack],
  unknown_tool: [lookup, () => ({ tool: 'close_all_tickets', args: {} })],
};

function resultsOf(prompt) {
  const out = [];
  for (const m of prompt) {
    if (m.role !== 'tool') continue;
    for (const p of m.content) {
      if (p.type !== 'tool-result') continue;
      const o = p.output ?? {};
      const error = String(o.type ?? '').startsWith('error');
      const text = typeof o.value === 'string' ? o.value : JSON.stringify(o.value);
      out.push({ tool: p.toolName, text, error });
    }
  }
  return out;
}

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 } };

async function post(env, path, body) {
  const r = await fetch(env.UNDERSTUDY_URL.replace(/\/$/, '') + path, {
    method: 'POST', body: JSON.stringify(body),
    headers: { 'content-type': 'application/json', 'Understudy-Attempt': env.UNDERSTUDY_ATTEMPT,
      ...(env.UNDERSTUDY_ADMIN_TOKEN ? { authorization: `Bearer ${env.UNDERSTUDY_ADMIN_TOKEN}` } : {}) } });
  if (r.status !== 201) throw new Error(`event answered ${r.status}: ${await r.text()}`);
}

/**
 * Plays script `name` against the attempt `env` names (UNDERSTUDY_URL, UNDERSTUDY_ATTEMPT,
 * UNDERSTUDY_ATTEMPT_ID; AGENT_TRANSPORT http|stdio, UNDERSTUDY_BIN for stdio); posts the
 * agent's "done" (or the framework's error) as an event; resolves to the outcome it printed.
 */
export async function play(name, env = process.env) {
  const steps = SCRIPTS[name];
  if (!steps) throw new Error(`no script ${name}: ${Object.keys(SCRIPTS).join('|')}`);
  const TRANSPORT = env.AGENT_TRANSPORT ?? 'http';
  let n = 0;
  let seen = []; // the tool results the model was last handed (reported as `seen`)
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      const results = resultsOf(options.prompt);
      seen = results;
      n += 1;
      if (results.length >= steps.length) {
        return { content: [{ type: 'text', text: 'done: ticket opened' }],
          finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
      }
      const next = steps[results.length](results);
      return { content: [{ type: 'tool-call', toolCallId: `call_${n}`, toolName: next.tool, input: JSON.stringify(next.args) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] };
    },
  });
  let final = null; let error = null; let client;
  try {
    const transport = TRANSPORT === 'stdio'
      // `understudy mcp stdio`, sent to the running test's server and attempt explicitly.
      ? new Experimental_StdioMCPTransport({ command: env.UNDERSTUDY_BIN ?? 'understudy',
          args: ['mcp', 'stdio', '--integration', 'desk', '--config', DESK_CONFIG,
            '--url', env.UNDERSTUDY_URL, '--attempt', env.UNDERSTUDY_ATTEMPT] })
      : { type: 'http', url: env.UNDERSTUDY_URL.replace(/\/$/, '') + '/desk',
          headers: { 'Understudy-Attempt': env.UNDERSTUDY_ATTEMPT } };
    client = await createMCPClient({ transport });
    const tools = await client.tools();
    const r = await generateText({ model, tools, prompt: 'Open a ticket for ada@example.com: refund for order 7',
      stopWhen: stepCountIs(10) });
    final = r.text;
  } catch (e) {
    error = `${e?.name ?? 'Error'}: ${e?.message ?? e}`.slice(0, 300);
  } finally {
    try { await client?.close(); } catch { /* closing after a fault */ }
  }
  const outcome = { framework: 'vercel-ai', script: name, transport: TRANSPORT, final, error,
    seen: seen.map((r) => ({ tool: r.tool, error: r.error, text: String(r.text ?? '').slice(0, 160) })) };
  console.log('AGENT-OUTCOME ' + JSON.stringify(outcome));
  const attempt = env.UNDERSTUDY_ATTEMPT_ID;
  if (final && final.startsWith('done')) {
    await post(env, `/_understudy/api/attempts/${attempt}/events`, { name: 'told_customer_done', kind: 'agent_message', text: final });
  } else if (error) {
    await post(env, `/_understudy/api/attempts/${attempt}/events`, { name: 'framework_error', kind: 'agent_message', text: error });
  }
  return outcome;
}

// `node run_vercel_ai.mjs SCRIPT` (under `understudy test -- …`): the environment it was given.
if (argv[1] && resolve(argv[1]) === fileURLToPath(import.meta.url)) {
  if (!SCRIPTS[argv[2]]) {
    console.error(`usage: run_vercel_ai.mjs ${Object.keys(SCRIPTS).join('|')}`);
    process.exit(2);
  }
  await play(argv[2]);
}
