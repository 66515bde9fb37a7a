"""simple-salesforce against a replay of recorded drafts (driven by tests/it/salesforce_record.rs):
it logs in as an unmodified agent does (SOAP login with user name, password and security
token, through the forward proxy — the login was not recorded, the built-in answers it with
the attempt's synthetic session), then a query and a Collections create get the recorded
answers. EXPECTED (JSON) holds those answers. Prints "salesforce-replay: ok" when every check
passed."""
from __future__ import annotations

import json
import os
import sys

import requests
from pytest_understudy.client import Server
from simple_salesforce import Salesforce

EXPECTED = json.loads(os.environ["EXPECTED"])
server = Server(os.environ["UNDERSTUDY_URL"], ca_cert=os.environ["UNDERSTUDY_CA"], forward_proxy=True)


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)


a = server.create_attempt()
s = requests.Session()
s.trust_env = False
s.proxies = a.proxies
s.verify = a.ca_cert
sf = Salesforce(username="ada@healthplus.example", password="Pa55-replay", security_token="Tok-replay", session=s)
check(sf.sf_instance == "rec.my.salesforce.com", f"instance {sf.sf_instance}")
check(sf.session_id.startswith("00D") and "!" in sf.session_id, f"session {sf.session_id[:4]}")
got = sf.query("SELECT Id, Name FROM Account")
check(got == EXPECTED["accounts"], f"query: {got} != {EXPECTED['accounts']}")
made = sf.restful("composite/sobjects", method="POST", json=EXPECTED["collections_request"])
check(made == EXPECTED["collections"], f"collections: {made} != {EXPECTED['collections']}")
ev = a.evidence()
ops = [e["operation_id"] for e in ev["tool_events"]]
check(ops[0] == "soap_login" and len(ops) == 3, f"operations {ops}")
drafted = {name[: -len(".json")] for name in EXPECTED["drafted"]}
check(set(ops[1:]) <= drafted, f"answered by drafts, not the built-in org: {ops} vs {sorted(drafted)}")
print("salesforce-replay: ok")
