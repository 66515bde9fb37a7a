// A tiny booking agent over the healthplus example's Salesforce mocks, shared by the vitest
// and Jest suites: look the caller up (unless told not to), book the contact, tell the caller.
const CONFIG = require('node:path').resolve(__dirname, '../../../examples/healthplus/understudy.json');
const PHONE_QUERY = "SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '555-0100'";

async function book(attempt, { lookup = true, contact } = {}) {
  const crm = attempt.baseUrl('crm') + '/services/data/v60.0';
  let id = contact;
  if (lookup) {
    const r = await fetch(`${crm}/query?q=${encodeURIComponent(PHONE_QUERY)}`);
    if (r.status !== 200) throw new Error(`lookup answered ${r.status}: ${await r.text()}`);
    id = id ?? (await r.json()).records[0].Id;
  }
  const r = await fetch(`${crm}/sobjects/Appointment__c`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ Contact__c: id, Requested_Date__c: '2026-12-01' }) });
  if (r.status !== 201) throw new Error(`booking answered ${r.status}: ${await r.text()}`);
  await attempt.event('told_caller_booked', { kind: 'agent_message', text: 'You are booked.' });
}

/** The lookup through the integration's plain URL and the attempt header (as an MCP client does). */
async function lookupWithHeader(attempt) {
  const url = attempt.mcpUrl('crm') + `/services/data/v60.0/query?q=${encodeURIComponent(PHONE_QUERY)}`;
  const r = await fetch(url, { headers: attempt.headers });
  if (r.status !== 200) throw new Error(`lookup answered ${r.status}: ${await r.text()}`);
}

module.exports = { CONFIG, book, lookupWithHeader };
