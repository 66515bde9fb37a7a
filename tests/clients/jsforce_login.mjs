// jsforce 3 logs in to understudy with `loginUrl` at the attempt's base URL (OAuth2
// username-password and JWT bearer), then queries and reads `conn.limitInfo`. Driven by
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

async function attempt(variants) {
  const [status, a] = await api('POST', '/_understudy/api/attempts', variants ? { variants } : {});
  check(status === 201, `attempt created: ${status}`);
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

console.log('jsforce-login: ok');
