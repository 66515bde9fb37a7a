// jsforce 3 logs in to understudy with `loginUrl` at the attempt's base URL (OAuth2
// username-password and JWT bearer), then queries, reads `conn.limitInfo` and runs Bulk API
// 2.0 (through the base URL and through the forward proxy). Driven by
// tests/it/salesforce.rs (jsforce is installed under target/ by the test's caller, see
// .ci/run). Prints "jsforce-login: ok" when every check passed.
import { createRequire } from 'node:module';
import crypto from 'node:crypto';

const require = createRequire(process.env.JSFORCE_DIR + '/');
const jsforce = require('jsforce');

const URL = process.env.UNDERSTUDY_URL;
const PASSWORD = 'Pa55-word-never-stored';
const CONSUMER_SECRET = 'Consumer-Secret-Never-Stored';
const SECRETS = [PASSWORD, CONSUMER_SECRET];

function check(cond, what) {
  if (!cond) {
    console.log(`FAIL: ${what}`);
    process.exit(1);
  }
}

async function api(method, path, body) {
  const r = await fetch(URL + path, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  return [r.status, await r.json()];
}

async function attempt(variants, faults) {
  const body = {};
  if (variants) body.variants = variants;
  if (faults) body.faults = faults;
  const [status, a] = await api('POST', '/_understudy/api/attempts', body);
  check(status === 201, `attempt created: ${status} ${JSON.stringify(a)}`);
  return a;
}

async function evidence(a) {
  const [status, ev] = await api('GET', `/_understudy/api/attempts/${a.attempt_id}/evidence`);
  check(status === 200, `evidence ${status}`);
  const text = JSON.stringify(ev);
  for (const s of SECRETS) check(!text.includes(s), `a secret reached the evidence: ${s.slice(0, 6)}`);
  return ev;
}

// 1. OAuth2 username-password flow with loginUrl at understudy.
{
  const a = await attempt();
  const base = a.base_urls.crm;
  const conn = new jsforce.Connection({
    oauth2: { loginUrl: base, clientId: 'CK-js', clientSecret: CONSUMER_SECRET },
    version: '59.0',
  });
  const info = await conn.login('ada@healthplus.example', PASSWORD);
  check(conn.instanceUrl === base, `instanceUrl ${conn.instanceUrl} is the base URL ${base}`);
  check(conn.accessToken.startsWith('00D'), 'access token');
  check(info.organizationId.startsWith('00D'), `org id ${info.organizationId}`);
  const res = await conn.query("SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '555-0100'", { autoFetch: true });
  check(res.totalSize === 1, `query: ${JSON.stringify(res)}`);
  check(conn.limitInfo.apiUsage && conn.limitInfo.apiUsage.limit === 15000, `limitInfo ${JSON.stringify(conn.limitInfo)}`);
  const g = await conn.describeGlobal();
  check(g.sobjects.some((o) => o.name === 'Account'), 'describeGlobal');
  const ev = await evidence(a);
  const login = ev.tool_events[0];
  check(login.operation_id === 'oauth_token', `first op ${login.operation_id}`);
  check(JSON.stringify(login.arguments) === JSON.stringify({ client_id: 'CK-js', grant_type: 'password', username: 'ada@healthplus.example' }),
    `login arguments ${JSON.stringify(login.arguments)}`);
  check(!JSON.stringify(ev).includes(conn.accessToken), 'the access token is not in the evidence');
}

// 2. JWT bearer: an assertion signed with a key made here.
{
  const a = await attempt();
  const base = a.base_urls.crm;
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const head = b64({ alg: 'RS256' });
  const claims = b64({ iss: 'CK-jwt-js', sub: 'ada@healthplus.example', aud: 'https://login.salesforce.com', exp: Math.floor(Date.now() / 1000) + 300 });
  const sig = crypto.sign('RSA-SHA256', Buffer.from(`${head}.${claims}`), privateKey).toString('base64url');
  const assertion = `${head}.${claims}.${sig}`;
  const conn = new jsforce.Connection({ oauth2: { loginUrl: base }, version: '59.0' });
  await conn.authorize({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion });
  check(conn.instanceUrl === base, 'JWT instanceUrl');
  const res = await conn.query("SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '555-0100'");
  check(res.totalSize === 1, 'query after JWT');
  const ev = await evidence(a);
  const args = ev.tool_events[0].arguments;
  check(args.client_id === 'CK-jwt-js' && args.claims.sub === 'ada@healthplus.example', `jwt arguments ${JSON.stringify(args)}`);
  check(!JSON.stringify(ev).includes(sig), 'the assertion is not in the evidence');
}

// 3. A wrong password: jsforce raises its own error with Salesforce's code.
{
  const a = await attempt({ 'crm/oauth_token': 'invalid_grant' });
  const conn = new jsforce.Connection({ oauth2: { loginUrl: a.base_urls.crm, clientId: 'CK-js', clientSecret: CONSUMER_SECRET } });
  let err = null;
  try {
    await conn.login('ada@healthplus.example', 'wrong');
  } catch (e) {
    err = e;
  }
  check(err && /invalid_grant/.test(`${err.name} ${err.message}`), `wrong password error: ${err}`);
  await evidence(a);
}

// 4. Over the daily limit: 403 REQUEST_LIMIT_EXCEEDED, an error jsforce raises, with the
// usage in conn.limitInfo.
{
  const a = await attempt({ 'crm/describe_global': 'request_limit_exceeded' });
  const conn = new jsforce.Connection({ oauth2: { loginUrl: a.base_urls.crm, clientId: 'CK-js', clientSecret: CONSUMER_SECRET }, version: '59.0' });
  await conn.login('ada@healthplus.example', PASSWORD);
  let err = null;
  try {
    await conn.describeGlobal();
  } catch (e) {
    err = e;
  }
  check(err && err.errorCode === 'REQUEST_LIMIT_EXCEEDED', `limit error: ${err && err.errorCode} ${err}`);
  check(conn.limitInfo.apiUsage && conn.limitInfo.apiUsage.used === 2, `limitInfo after the refusal ${JSON.stringify(conn.limitInfo)}`);
  const ev = await evidence(a);
  check(ev.tool_events[1].http_status === 403, 'the refusal is recorded');
}

// 4b. Over the daily limit as chaos, not a variant: the attempt's `status` fault 403 on the
// default org's query (once) and on describeGlobal answers Salesforce's REQUEST_LIMIT_EXCEEDED;
// jsforce raises it and reads the usage into conn.limitInfo; the next query goes through.
{
  const a = await attempt(undefined, {
    'crm/query': { kind: 'status', status: 403, after_effect: false, times: 1 },
    'crm/describe_global': { kind: 'status', status: 403, after_effect: false },
  });
  const conn = new jsforce.Connection({ oauth2: { loginUrl: a.base_urls.crm, clientId: 'CK-js', clientSecret: CONSUMER_SECRET }, version: '59.0' });
  await conn.login('ada@healthplus.example', PASSWORD);
  let err = null;
  try {
    await conn.query('SELECT Id, Name FROM Account');
  } catch (e) {
    err = e;
  }
  check(err && err.errorCode === 'REQUEST_LIMIT_EXCEEDED', `chaos limit error: ${err && err.errorCode} ${err}`);
  check(conn.limitInfo.apiUsage && conn.limitInfo.apiUsage.used === 2 && conn.limitInfo.apiUsage.limit === 15000,
    `limitInfo after the chaos refusal ${JSON.stringify(conn.limitInfo)}`);
  const again = await conn.query('SELECT Id, Name FROM Account');
  check(again.totalSize === 0, `the query after the fault: ${JSON.stringify(again)}`);
  err = null;
  try {
    await conn.describeGlobal();
  } catch (e) {
    err = e;
  }
  check(err && err.errorCode === 'REQUEST_LIMIT_EXCEEDED', `chaos on describeGlobal: ${err && err.errorCode} ${err}`);
  const ev = await evidence(a);
  const [, q, q2, d] = ev.tool_events;
  check(q.operation_id === 'query' && q.result_status === 'blocked' && q.fault && q.fault.kind === 'status',
    `the faulted query is recorded: ${JSON.stringify(q)}`);
  check(q2.result_status === 'ok' && !q2.fault, `the next query is not faulted: ${JSON.stringify(q2)}`);
  check(d.operation_id === 'describe_global' && d.fault, `describeGlobal faulted: ${JSON.stringify(d)}`);
}

// 5. Through the forward proxy (jsforce's Bulk API 2.0 resolves its URLs against the
// instance's origin, so it reaches understudy as the real host does): login at
// login.salesforce.com, bulk2.loadAndWaitForResults, an autoFetch query over three pages, a
// Collections create with allOrNone, and a Composite Graph whose references the org resolves.
{
  const a = await attempt();
  const proxy = `http://${a.token}:x@${new globalThis.URL(URL).host}`;
  const conn = new jsforce.Connection({
    oauth2: { loginUrl: 'https://login.salesforce.com', clientId: 'CK-js', clientSecret: CONSUMER_SECRET, httpProxy: proxy },
    httpProxy: proxy,
    version: '59.0',
  });
  await conn.login('ada@healthplus.example', PASSWORD);
  check(conn.instanceUrl === 'https://healthplus.my.salesforce.com', `proxied instanceUrl ${conn.instanceUrl}`);
  const input = Array.from({ length: 450 }, (_, i) => ({ FirstName: `F${i}`, LastName: `L${String(i).padStart(3, '0')}` }));
  input.push({ FirstName: 'NoLastName' });
  const r = await conn.bulk2.loadAndWaitForResults({ object: 'Contact', operation: 'insert', input, pollInterval: 50, pollTimeout: 20000 });
  check(r.successfulResults.length === 450, `bulk2 successful ${r.successfulResults.length}`);
  check(r.failedResults.length === 1 && /REQUIRED_FIELD_MISSING/.test(r.failedResults[0].sf__Error),
    `bulk2 failed ${JSON.stringify(r.failedResults)}`);
  check(r.successfulResults[0].sf__Id.startsWith('003'), `bulk2 ids ${JSON.stringify(r.successfulResults[0])}`);
  const res = await conn.query('SELECT Id, LastName FROM Contact ORDER BY LastName',
    { autoFetch: true, maxFetch: 1000, headers: { 'Sforce-Query-Options': 'batchSize=200' } });
  check(res.records.length === 450 && res.totalSize === 450, `autoFetch ${res.records.length}/${res.totalSize}`);
  check(res.records.every((rec, i) => rec.LastName === `L${String(i).padStart(3, '0')}`), 'autoFetch pages in order');
  const created = await conn.sobject('Account').create([{ Name: 'Acme' }, { Name: '' }], { allOrNone: true });
  check(created.length === 2 && created.every((x) => !x.success), `allOrNone results ${JSON.stringify(created)}`);
  const accounts = await conn.query('SELECT Id FROM Account');
  check(accounts.totalSize === 0, 'allOrNone rolled the good record back');
  const graph = await conn.requestPost('/composite/graph', { graphs: [{ graphId: 'g1', compositeRequest: [
    { method: 'POST', url: '/services/data/v59.0/sobjects/Account', referenceId: 'acct', body: { Name: 'Graph Co' } },
    { method: 'POST', url: '/services/data/v59.0/sobjects/Contact', referenceId: 'ct', body: { LastName: 'Graph', AccountId: '@{acct.id}' } },
    { method: 'GET', url: '/services/data/v59.0/sobjects/Contact/@{ct.id}', referenceId: 'back' },
  ] }] });
  const g = graph.graphs[0];
  const acct = g.graphResponse.compositeResponse[0].body.id;
  check(g.isSuccessful && g.graphResponse.compositeResponse[2].body.AccountId === acct, `graph ${JSON.stringify(graph)}`);
  const ev = await evidence(a);
  const ops = ev.tool_events.map((e) => e.operation_id);
  const q = ops.indexOf('query');
  check(q > 0 && ops[q + 1] === 'query_more' && ops[q + 2] === 'query_more', `pages recorded in order: ${ops}`);
  for (const op of ['bulk_ingest_create', 'bulk_ingest_upload', 'bulk_ingest_state', 'bulk_ingest_get', 'bulk_ingest_results', 'collections_create', 'composite_graph']) {
    check(ops.includes(op), `${op} in ${ops}`);
  }
  check(!JSON.stringify(ev).includes(conn.accessToken), 'the access token is not in the evidence');
}

// 6. Bulk API 2.0 through the attempt's base URL (no proxy): jsforce resolves its Bulk URLs
// against the instance URL's origin (`/services/data/…/jobs/ingest`) or replaces its last
// segment (`/~<token>/services/data/…/jobs/query`), so neither names the integration; the
// session the login handed out routes them to this attempt's `crm`.
{
  const a = await attempt();
  const base = a.base_urls.crm;
  const conn = new jsforce.Connection({
    oauth2: { loginUrl: base, clientId: 'CK-js', clientSecret: CONSUMER_SECRET },
    version: '59.0',
  });
  await conn.login('ada@healthplus.example', PASSWORD);
  check(conn.instanceUrl === base, `base-URL instanceUrl ${conn.instanceUrl}`);
  const input = [
    { FirstName: 'Base', LastName: 'B0' },
    { FirstName: 'Base', LastName: 'B1' },
    { FirstName: 'NoLastName' },
  ];
  const r = await conn.bulk2.loadAndWaitForResults({ object: 'Contact', operation: 'insert', input, pollInterval: 50, pollTimeout: 20000 });
  check(r.successfulResults.length === 2 && r.successfulResults.every((x) => x.sf__Id.startsWith('003')),
    `base-URL bulk2 successful ${JSON.stringify(r.successfulResults)}`);
  check(r.failedResults.length === 1 && /REQUIRED_FIELD_MISSING/.test(r.failedResults[0].sf__Error),
    `base-URL bulk2 failed ${JSON.stringify(r.failedResults)}`);
  const stream = await conn.bulk2.query("SELECT Id, LastName FROM Contact WHERE FirstName = 'Base' ORDER BY LastName",
    { pollInterval: 50, pollTimeout: 20000 });
  const rows = await new Promise((resolve, reject) => {
    const got = [];
    stream.on('record', (rec) => got.push(rec));
    stream.on('error', reject);
    stream.on('end', () => resolve(got));
  });
  check(JSON.stringify(rows.map((x) => x.LastName)) === JSON.stringify(['B0', 'B1']), `base-URL bulk2 query ${JSON.stringify(rows)}`);
  const ev = await evidence(a);
  const ops = ev.tool_events.map((e) => e.operation_id);
  for (const op of ['oauth_token', 'bulk_ingest_create', 'bulk_ingest_upload', 'bulk_ingest_state', 'bulk_ingest_get', 'bulk_ingest_results',
    'bulk_query_create', 'bulk_query_get', 'bulk_query_results']) {
    check(ops.includes(op), `base-URL ${op} in ${ops}`);
  }
  check(ev.tool_events.every((e) => e.integration === 'crm' && e.result_status === 'ok'),
    `every base-URL call is crm's and answered: ${JSON.stringify(ev.tool_events.map((e) => [e.operation_id, e.integration, e.result_status]))}`);
  check(!JSON.stringify(ev).includes(conn.accessToken), 'the access token is not in the evidence');
}

console.log('jsforce-login: ok');
