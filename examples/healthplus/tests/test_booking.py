"""The booking agent against understudy: one attempt per test, verdict checked by the plugin."""
from __future__ import annotations

import pytest
import requests

from booking_agent import book_for_caller, connect


def salesforce_for(attempt):
    """simple-salesforce pointed at this attempt through the forward proxy."""
    session = requests.Session()
    session.trust_env = False          # only this attempt's proxy, never the environment's
    session.proxies = attempt.proxies  # http://<token>:x@127.0.0.1:PORT
    session.verify = attempt.ca_cert   # the throw-away test CA
    return connect(session)


def test_books_a_known_caller(understudy_attempt):
    out = book_for_caller(salesforce_for(understudy_attempt), "555-0100", "2026-12-01")
    assert out.booked, out.message
    assert out.confirmation == "HP-APT-0742"
    ops = [e["operation_id"] for e in understudy_attempt.evidence()["tool_events"]]
    assert ops == ["soap_login", "lookup_contact_by_phone", "book_appointment"]
    login = understudy_attempt.evidence()["tool_events"][0]
    assert login["arguments"] == {"grant_type": "password", "via": "soap", "username": "agent@healthplus.example"}


@pytest.mark.understudy(variants={"crm/book_appointment": "no_slots"})
def test_tells_the_caller_when_there_is_no_slot(understudy_attempt):
    out = book_for_caller(salesforce_for(understudy_attempt), "555-0100", "2026-12-01")
    assert not out.booked
    assert "No availability" in out.message


@pytest.mark.understudy(variants={"crm/lookup_contact_by_phone": "not_found_then_found"})
def test_does_not_book_an_unknown_caller(understudy_attempt):
    out = book_for_caller(salesforce_for(understudy_attempt), "555-0100", "2026-12-01")
    assert not out.booked
    writes = [e for e in understudy_attempt.evidence()["tool_events"] if e["is_write"]]
    assert writes == [], "no booking for a caller we could not find"
