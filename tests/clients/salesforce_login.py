"""simple-salesforce logs in to understudy as an unmodified agent does, through the forward
proxy (simple-salesforce always speaks HTTPS to *.salesforce.com): SOAP login with user name,
password and security token, OAuth password, JWT bearer (a key made here), client
credentials, a wrong password; then describe, search, limits, a query and the Tooling query.
Driven by tests/it/salesforce.rs, which starts the server and greps the data dir for the
secrets below afterwards. Prints "salesforce-login: ok" when every check passed."""
from __future__ import annotations

import json
import os
import sys

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pytest_understudy.client import Server
from simple_salesforce import Salesforce
from simple_salesforce.exceptions import SalesforceAuthenticationFailed

PASSWORD = "Pa55-word-never-stored"
TOKEN = "SecTokNeverStored42"
CONSUMER_SECRET = "Consumer-Secret-Never-Stored"
USER = "ada@healthplus.example"
SECRETS = [PASSWORD, TOKEN, CONSUMER_SECRET]

server = Server(os.environ["UNDERSTUDY_URL"], ca_cert=os.environ["UNDERSTUDY_CA"], forward_proxy=True)


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)


def session(attempt) -> requests.Session:
    s = requests.Session()
    s.trust_env = False
    s.proxies = attempt.proxies
    s.verify = attempt.ca_cert
    return s


REPORTS = os.environ.get("SALESFORCE_REPORTS")


def reports_clean(attempt, stem: str, extra=()) -> None:
    """The attempt's HTML and JUnit reports, written where the Rust test greps them too,
    hold no secret."""
    if not REPORTS:
        return
    from pathlib import Path
    for p in attempt.write_reports(Path(REPORTS), stem):
        text = p.read_text()
        check(len(text) > 100, f"{p} is a report")
        for s in SECRETS + list(extra):
            check(s not in text, f"a secret reached the report {p.name}: {s[:6]}…")


def login_event(ev):
    return ev["tool_events"][0]


def no_secret_in(ev, extra=()) -> None:
    text = json.dumps(ev)
    for s in SECRETS + list(extra):
        check(s not in text, f"a secret reached the evidence: {s[:6]}…")


# 1. SOAP login (simple-salesforce's default), then the reads an agent makes.
a = server.create_attempt()
sf = Salesforce(username=USER, password=PASSWORD, security_token=TOKEN, session=session(a))
check(sf.sf_instance == "healthplus.my.salesforce.com", f"instance {sf.sf_instance}")
check(sf.session_id.startswith("00D") and "!" in sf.session_id, "a session id shaped like Salesforce's")
sid = sf.session_id
found = sf.query("SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '555-0100'")
check(found["totalSize"] == 1, f"query after login: {found}")
usage = sf.api_usage.get("api-usage")
check(usage is not None and usage.total == 15000 and usage.used >= 2, f"Sforce-Limit-Info parsed: {sf.api_usage}")
described = sf.describe()
check(any(o["name"] == "Contact" for o in described["sobjects"]), "describeGlobal lists Contact")
check(sf.search("FIND {Ada}")["searchRecords"] == [], "SOSL search answers")
limits = sf.limits()
check(limits["DailyApiRequests"]["Max"] == 15000, f"limits: {limits}")
check(limits["DailyApiRequests"]["Remaining"] < 15000, "limits count the attempt's calls")
tooling = sf.toolingexecute("query/?q=SELECT+Id+FROM+ApexClass")
check(tooling["done"] is True, f"tooling query: {tooling}")
versions = session(a).get("https://healthplus.my.salesforce.com/services/data/").json()
check(any(v["version"] == "59.0" for v in versions), "versions list")
# Every other host stays refused.
try:
    r = session(a).get("https://example.org/")
    check(r.status_code == 403, f"an unknown host is refused, got {r.status_code}")
except requests.exceptions.RequestException:
    pass
ev = a.evidence()
ops = [e["operation_id"] for e in ev["tool_events"]]
check(ops[:2] == ["soap_login", "lookup_contact_by_phone"], f"operations {ops}")
for op in ["describe_global", "search", "limits", "tooling_query", "versions"]:
    check(op in ops, f"{op} in {ops}")
check(login_event(ev)["arguments"] == {"grant_type": "password", "via": "soap", "username": USER},
      f"login arguments {login_event(ev)['arguments']}")
check(login_event(ev)["is_write"] is False, "a login is not a write")
no_secret_in(ev, [sid])
a.end()
reports_clean(a, "soap", [sid])

# 2. OAuth 2.0 username-password flow; test.salesforce.com is a login host too. The example's
# login contract (client credentials only) fails this attempt.
a = server.create_attempt(contracts=["login_contract"])
sf = Salesforce(username=USER, password=PASSWORD + TOKEN, consumer_key="CK-healthplus",
                consumer_secret=CONSUMER_SECRET, domain="test", session=session(a))
check(sf.sf_instance == "healthplus.my.salesforce.com", f"oauth instance {sf.sf_instance}")
check(sf.query("SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '555-0100'")["totalSize"] == 1, "query after OAuth")
ev = a.evidence()
check(login_event(ev)["operation_id"] == "oauth_token", f"oauth_token first: {login_event(ev)}")
check(login_event(ev)["arguments"] == {"grant_type": "password", "client_id": "CK-healthplus", "username": USER},
      f"oauth arguments {login_event(ev)['arguments']}")
no_secret_in(ev, [sf.session_id])
a.end()
ev = a.evidence()
codes = [r["code"] for r in ev["verdict_reasons"]]
check(ev["verdict"] == "fail" and any(c.startswith("contract:login_contract") for c in codes),
      f"the login contract fails a password login: {ev['verdict']} {codes}")
reports_clean(a, "oauth")

# 3. JWT bearer flow with a key made here (the signature is not verified in replay).
key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                        serialization.NoEncryption()).decode()
a = server.create_attempt()
sf = Salesforce(username=USER, consumer_key="CK-jwt", privatekey=pem, session=session(a))
check(sf.session_id.startswith("00D"), "JWT login")
ev = a.evidence()
args = login_event(ev)["arguments"]
check(args["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" and args["client_id"] == "CK-jwt"
      and args["username"] == USER and args["claims"]["aud"] == "https://login.salesforce.com",
      f"jwt arguments {args}")
check("assertion" not in json.dumps(args), "the assertion is not recorded")
no_secret_in(ev, [sf.session_id, pem.splitlines()[1]])
a.end()
reports_clean(a, "jwt", [sf.session_id, pem.splitlines()[1]])

# 4. Client credentials at a My Domain host: the login contract passes.
a = server.create_attempt(contracts=["login_contract"])
sf = Salesforce(consumer_key="CK-cc", consumer_secret=CONSUMER_SECRET, domain="healthplus.my", session=session(a))
ev = a.evidence()
check(login_event(ev)["arguments"] == {"grant_type": "client_credentials", "client_id": "CK-cc"},
      f"client credentials arguments {login_event(ev)['arguments']}")
no_secret_in(ev, [sf.session_id])
a.end()
ev = a.evidence()
check(ev["verdict"] == "pass", f"the login contract passes client credentials: {ev['verdict_reasons']}")

# 5. A wrong password: the test selects the login's `invalid_grant` variant; the client
# raises its own error type with Salesforce's codes.
a = server.create_attempt(variants={"crm/soap_login": "invalid_grant", "crm/oauth_token": "invalid_grant"})
try:
    Salesforce(username=USER, password="wrong", security_token=TOKEN, session=session(a))
    check(False, "a wrong SOAP password must fail")
except SalesforceAuthenticationFailed as e:
    check("INVALID_LOGIN" in str(e), f"SOAP fault code: {e}")
try:
    Salesforce(username=USER, password="wrong", consumer_key="CK", consumer_secret=CONSUMER_SECRET,
               session=session(a))
    check(False, "a wrong OAuth password must fail")
except SalesforceAuthenticationFailed as e:
    check("invalid_grant" in str(e), f"OAuth error: {e}")
ev = a.evidence()
check([e["http_status"] for e in ev["tool_events"]] == [500, 400], "the failed logins are recorded")
no_secret_in(ev)
a.end()

# 6. Writes as coherent state: Bulk API 2.0 insert, `query_all` over three pages, a Bulk 2.0
# query paged by Sforce-Locator, a Composite with a reference and Collections with allOrNone.
a = server.create_attempt()
sf = Salesforce(username=USER, password=PASSWORD, security_token=TOKEN, session=session(a))
rows = [{"FirstName": f"F{i}", "LastName": f"L{i:03d}"} for i in range(450)]
res = sf.bulk2.Contact.insert(records=rows, wait=0.1)
check(res[0]["numberRecordsProcessed"] == 450 and res[0]["numberRecordsFailed"] == 0, f"bulk2 insert {res}")
every = sf.query_all("SELECT Id, LastName FROM Contact ORDER BY LastName",
                     headers={"Sforce-Query-Options": "batchSize=200"})
names = [r["LastName"] for r in every["records"]]
check(every["totalSize"] == 450 and names == [f"L{i:03d}" for i in range(450)], f"query_all {len(names)}")
pages = list(sf.bulk2.Contact.query("SELECT Id, LastName FROM Contact WHERE LastName LIKE 'L00%' ORDER BY LastName",
                                    max_records=5, wait=0.1))
check(len(pages) == 2, f"bulk2 query pages {len(pages)}")
got = [line.split(",")[1] for page in pages for line in page.strip().splitlines()[1:]]
check(got == [f"L{i:03d}" for i in range(10)], f"bulk2 query rows {got}")
comp = sf.restful("composite", method="POST", json={"allOrNone": True, "compositeRequest": [
    {"method": "POST", "url": "/services/data/v59.0/sobjects/Account", "referenceId": "acct", "body": {"Name": "Acme"}},
    {"method": "PATCH", "url": "/services/data/v59.0/sobjects/Contact/@{first.records[0].Id}", "referenceId": "upd",
     "body": {"AccountId": "@{acct.id}"}},
]})
check(comp["compositeResponse"][1]["httpStatusCode"] == 400, f"a reference to nothing fails: {comp}")
check(sf.query("SELECT Id FROM Account")["totalSize"] == 0, "allOrNone rolled the account back")
coll = sf.restful("composite/sobjects", method="POST", json={"allOrNone": False, "records": [
    {"attributes": {"type": "Account"}, "Name": "Acme"}, {"attributes": {"type": "Account"}}]})
check([c["success"] for c in coll] == [True, False], f"collections per-record results {coll}")
check(sf.Account.get(coll[0]["id"])["Name"] == "Acme", "the created account reads back")
ev = a.evidence()
ops = [e["operation_id"] for e in ev["tool_events"]]
i = ops.index("query")
check(ops[i:i + 3] == ["query", "query_more", "query_more"], f"pages recorded in order: {ops}")
for op in ["bulk_ingest_create", "bulk_ingest_upload", "bulk_ingest_state", "bulk_ingest_get",
           "bulk_query_create", "bulk_query_get", "bulk_query_results", "composite", "collections_create", "sobject_get"]:
    check(op in ops, f"{op} in {ops}")
upload = next(e for e in ev["tool_events"] if e["operation_id"] == "bulk_ingest_upload")
check(upload["arguments"]["rows"] == 450 and upload["is_write"] is True, f"upload recorded {upload['arguments']}")
bq = next(e for e in ev["tool_events"] if e["operation_id"] == "bulk_query_create")
check(bq["is_write"] is False, "a Bulk query job is a read")
no_secret_in(ev, [sf.session_id])
a.end()
reports_clean(a, "bulk", [sf.session_id])

print("salesforce-login: ok")
