"""LangChain against the Salesforce integration: `create_agent` with the scripted chat model of
run_langchain.py and LangChain's own Salesforce tool (`langchain_salesforce.SalesforceTool`,
built on simple-salesforce). The agent logs in as a simple-salesforce user does
(`Salesforce(username, password, security_token)`, a SOAP login); the test hands it a
`requests` session routed through understudy's forward proxy with the attempt's token.

The scripts are the support-desk flow on Salesforce objects: find the customer's Contact by
email (SOQL), open a Case for it, read the Case back (SOQL), say "done".
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import requests
from langchain.agents import create_agent
from langchain_core.tools import BaseTool
from langchain_salesforce import SalesforceTool
from simple_salesforce import Salesforce

import desk_scripts as d
import run_langchain

CONTRACT = "create_case_contract"
C = f"contract:{CONTRACT}:"
CONTACT_SOQL = f"SELECT Id, FirstName, LastName, Email FROM Contact WHERE Email = '{d.EMAIL}'"


def case_soql(case_id: str) -> str:
    return f"SELECT Id, Status, ContactId, Subject FROM Case WHERE Id = '{case_id}'"


def _json(text: str) -> Any:
    return json.loads(text)


def contact_id(results: list[d.Result]) -> str:
    for r in results:
        if r.tool == "salesforce" and not r.error and '"Contact"' in r.text:
            return _json(r.text)["records"][0]["Id"]
    raise AssertionError(f"no Contact lookup among {results}")


def case_id(results: list[d.Result]) -> str:
    for r in reversed(results):
        if r.tool == "salesforce" and not r.error:
            try:
                v = _json(r.text)
            except ValueError:
                continue
            if isinstance(v, dict) and v.get("success") and v.get("id"):
                return v["id"]
    return "none"


lookup: d.Step = lambda r: d.Call("salesforce", {"operation": "query", "query": CONTACT_SOQL})


def create(cid: str | None = None) -> d.Step:
    return lambda r: d.Call("salesforce", {
        "operation": "create", "object_name": "Case",
        "record_data": {"ContactId": cid or contact_id(r), "Subject": d.SUBJECT}})


read_back: d.Step = lambda r: d.Call("salesforce", {"operation": "query", "query": case_soql(case_id(r))})

SCRIPTS: dict[str, d.Script] = {
    s.name: s
    for s in [
        d.Script("good", [lookup, create(), read_back], None,
                 why="lookup, a Case for the looked-up Contact, read back, done"),
        d.Script("write_before_lookup", [create("003Hp00000Ab12CAAR"), lookup, read_back],
                 [C + "preconditions.required_before[crm/lookup_contact]"],
                 why="the Case is opened before the lookup"),
        d.Script("invented_argument", [lookup, create("003Hp00000Zz99ZAAZ"), read_back],
                 [C + "arguments.sources[ContactId]"],
                 why="the Contact id is not the one the lookup answered"),
    ]
}


class AgentSalesforceTool(SalesforceTool):
    """langchain-salesforce 0.2.2 overrides `invoke`/`ainvoke` and reads a tool call's
    arguments only from an object with `.args`; LangGraph's tool node (what `create_agent`
    runs) passes a ToolCall dict (`{"name", "args", "id", "type": "tool_call"}`), so every call
    fails with "Input must be a dictionary with an 'operation' key" (measured). A tool call
    goes through LangChain's own `BaseTool` path instead, which validates the arguments and
    answers a ToolMessage; anything else as the package does."""

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        if isinstance(input, dict) and input.get("type") == "tool_call":
            return BaseTool.invoke(self, input, config, **kwargs)
        return super().invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        if isinstance(input, dict) and input.get("type") == "tool_call":
            return await BaseTool.ainvoke(self, input, config, **kwargs)
        return await super().ainvoke(input, config, **kwargs)


def login(session: requests.Session) -> Salesforce:
    """simple-salesforce's default login (SOAP, user name + password + security token)."""
    return Salesforce(username="agent@desk.example", password="not-a-real-password",
                      security_token="not-a-real-token", session=session)


def run(script: d.Script, session: requests.Session) -> str:
    tool = AgentSalesforceTool(username="", password="", security_token="",
                          salesforce_client=login(session))
    run_langchain.SCRIPT = script

    async def go() -> str:
        agent = create_agent(run_langchain.ScriptedChat(messages=iter([])), [tool])
        out = await agent.ainvoke(
            {"messages": [{"role": "user",
                           "content": "Open a case for ada@example.com: refund for order 7"}]})
        return run_langchain.text_of(out["messages"][-1].content)

    return asyncio.run(go())


if __name__ == "__main__":
    # Under `understudy test --forward-proxy -- python run_langchain_salesforce.py SCRIPT`:
    # requests takes HTTPS_PROXY (the attempt's token in it) and REQUESTS_CA_BUNDLE (the test
    # CA) from the environment, as an unmodified agent would.
    import sys

    if len(sys.argv) != 2 or sys.argv[1] not in SCRIPTS:
        print(f"usage: {sys.argv[0]} {'|'.join(SCRIPTS)}", file=sys.stderr)
        sys.exit(2)
    name = sys.argv[1]
    try:
        d.finish("langchain", f"salesforce-{name}", run(SCRIPTS[name], requests.Session()), None)
    except Exception as e:  # the framework's own failure is an outcome to report
        d.finish("langchain", f"salesforce-{name}", None, e)
