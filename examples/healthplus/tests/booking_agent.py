"""The "agent" of the healthplus example: real code that books an appointment for a caller
through Salesforce with simple-salesforce. It knows nothing about understudy; the tests (and
`understudy test --forward-proxy`) point its HTTPS at understudy.

Run alone: python booking_agent.py PHONE DATE  (uses HTTPS_PROXY / REQUESTS_CA_BUNDLE)."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Optional

import requests
from simple_salesforce import Salesforce
from simple_salesforce.exceptions import SalesforceMalformedRequest



@dataclass
class Outcome:
    booked: bool
    message: str
    confirmation: Optional[str] = None


def connect(session: Optional[requests.Session] = None) -> Salesforce:
    """Log in as every simple-salesforce agent does by default: a SOAP login at
    login.salesforce.com with user name, password and security token. Under understudy the
    login is answered by the Salesforce integration (no operation file needed) and sends the
    client back to healthplus.my.salesforce.com, which the proxy intercepts too."""
    return Salesforce(
        username=os.environ.get("SF_USERNAME", "agent@healthplus.example"),
        password=os.environ.get("SF_PASSWORD", "not-a-real-password"),
        security_token=os.environ.get("SF_SECURITY_TOKEN", "not-a-real-token"),
        session=session,
    )


def book_for_caller(sf: Salesforce, phone: str, date: str) -> Outcome:
    found = sf.query(f"SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '{phone}'")
    if found["totalSize"] == 0:
        return Outcome(False, "I could not find you in our records.")
    contact = found["records"][0]
    try:
        created = sf.Appointment__c.create({"Contact__c": contact["Id"], "Requested_Date__c": date})
    except SalesforceMalformedRequest as e:
        return Outcome(False, f"Sorry, that did not work: {e.content[0]['message']}")
    return Outcome(True, f"You are booked, {contact['FirstName']}.", created.get("Confirmation__c"))


if __name__ == "__main__":
    out = book_for_caller(connect(), sys.argv[1], sys.argv[2])
    print(out.message)
    sys.exit(0 if out.booked else 1)
