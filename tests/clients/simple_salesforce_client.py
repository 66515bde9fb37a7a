"""The real simple-salesforce client against understudy (run by tests/it/clients.rs).

simple-salesforce always talks https://<instance>/services/data/vNN.N/..., so it reaches
understudy the way such agents do: through `serve --forward-proxy` (HTTPS_PROXY) trusting
the local test CA (REQUESTS_CA_BUNDLE). Exit 0 when every assertion holds.
"""
import os
import sys

from simple_salesforce import Salesforce
from simple_salesforce.exceptions import SalesforceGeneralError, SalesforceMalformedRequest

# Never let this script reach the real Salesforce: it must go through a loopback understudy.
proxy = os.environ.get("HTTPS_PROXY", "")
if not (proxy.startswith("http://127.0.0.1:") or proxy.startswith("http://localhost:")):
    sys.exit(f"refusing to run: HTTPS_PROXY must be a loopback understudy, got {proxy!r}")

sf = Salesforce(instance_url="https://healthplus.my.salesforce.com", session_id="test-session")

# A SOQL lookup (simple-salesforce sends .../query/?q=SELECT+...).
r = sf.query("SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '555-0100'")
assert r["totalSize"] == 1, r
assert r["records"][0]["Phone"] == "555-0100", r
assert r["records"][0]["attributes"]["type"] == "Contact", r

# A create answers 201 with the Salesforce create body.
created = sf.Appointment__c.create({"Contact__c": "003Hp00000Ab12CAAR", "Requested_Date__c": "2026-12-01"})
assert created["success"] is True and len(created["id"]) == 18, created
assert created["Slot_Start__c"] == "2026-12-03T09:00:00Z", created

# A bad argument is an ordinary Salesforce error the client parses: 400 with [{message, errorCode, fields}].
try:
    sf.Appointment__c.create({"Contact__c": "003Hp00000Ab12CAAR"})
    raise AssertionError("a create without Requested_Date__c must fail")
except SalesforceMalformedRequest as e:
    assert e.status == 400, e.status
    assert isinstance(e.content, list) and e.content[0]["errorCode"], e.content

# A request no operation matches is a harness error (500), never a success.
try:
    sf.restful("no/such/resource")
    raise AssertionError("an unmatched request must fail")
except SalesforceGeneralError as e:
    assert e.status == 500, e.status

print("simple-salesforce: ok")
sys.exit(0)
