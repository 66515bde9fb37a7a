"""The framework matrix under the pytest plugin (pytest-understudy): each Python framework
plays every support-desk script in this one pytest process, one attempt per test from the
plugin's `understudy_attempt` fixture (the contract and the script's variant pinned by the
`understudy` marker). A passing script must leave the plugin's own verdict check green; a
misbehaviour must make the plugin raise `VerdictFailed` naming the script's contract check.

Run (the plugin from the source tree, no install):
    PYTHONPATH=clients/python/src UNDERSTUDY_BIN=target/debug/understudy \
    target/agents-venv/bin/python -m pytest -p pytest_understudy.plugin -q \
        clients/agents/python/test_plugin_matrix.py
A framework that cannot be imported fails (never skips) under CI=true.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import desk_scripts as d  # noqa: E402
from test_matrix import CRASH_ON_DROPPED_CONNECTION  # noqa: E402

# framework → (runner module, the framework's own module)
FRAMEWORKS = {
    "pydantic-ai": ("run_pydantic_ai", "pydantic_ai"),
    "openai-agents": ("run_openai_agents", "agents"),
    "langchain": ("run_langchain", "langchain_mcp_adapters"),
}
TRANSPORTS = ["http", "stdio"]
CONTRACT = "create_ticket_contract"


def expected(framework: str, script: d.Script, transport: str) -> list[str] | None:
    """As under `understudy test` (test_matrix.py): a Python framework's run ends at the
    dropped connection of the faulted write, so the ticket is never read back."""
    if script.variant and (framework in CRASH_ON_DROPPED_CONNECTION or transport == "stdio"):
        return [d.C + "order[in_order]"]
    return script.expect


def cases() -> list[Any]:
    out = []
    for framework in FRAMEWORKS:
        for name, script in d.SCRIPTS.items():
            for transport in TRANSPORTS:
                want = expected(framework, script, transport)
                variants = dict([script.variant.split("=", 1)]) if script.variant else None
                # A failing script: the test itself asks the plugin's check and asserts the
                # reasons (the plugin's after-test check would only say "fail").
                mark = pytest.mark.understudy(contracts=[CONTRACT], variants=variants,
                                              check_verdict=want is None)
                out.append(pytest.param(framework, name, transport, want, marks=mark,
                                        id=f"{framework}-{name}-{transport}"))
    return out


@pytest.fixture(scope="module", autouse=True)
def _binary() -> None:
    if not os.environ.get("UNDERSTUDY_BIN"):
        pytest.fail("set UNDERSTUDY_BIN to the understudy binary")


@pytest.mark.parametrize("framework,script,transport,want", cases())
def test_under_the_plugin(framework: str, script: str, transport: str, want: list[str] | None,
                          understudy_attempt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, module = FRAMEWORKS[framework]
    if importlib.util.find_spec(module) is None:
        msg = f"{framework} is not installed ({module})"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    from pytest_understudy import VerdictFailed

    a = understudy_attempt
    # What `understudy test` gives its command, from the plugin's attempt.
    monkeypatch.setenv("UNDERSTUDY_URL", a.server.url)
    monkeypatch.setenv("UNDERSTUDY_ATTEMPT", a.token)
    monkeypatch.setenv("UNDERSTUDY_ATTEMPT_ID", a.attempt_id)
    monkeypatch.setenv("AGENT_TRANSPORT", transport)
    s = d.SCRIPTS[script]
    play = importlib.import_module(runner).run
    try:
        d.finish(framework, script, play(s), None)
    except BaseException as e:  # the framework's own failure is an outcome (as d.main says;
        if isinstance(e, KeyboardInterrupt):  # a dropped connection can end the run with
            raise  # asyncio's CancelledError, a BaseException)
        d.finish(framework, script, None, e)
    if want is None:
        return  # the plugin's check after the test body: a `fail` verdict fails this test
    with pytest.raises(VerdictFailed) as failed:
        a.check_verdict()
    codes = [r.split(": ", 1)[0] for r in failed.value.reasons]
    missing = [c for c in want if c not in codes]
    assert not missing, f"{missing} not among {codes}"


def sf_cases() -> list[Any]:
    import run_langchain_salesforce as sf

    return [pytest.param(name, s.expect, id=f"langchain-salesforce-{name}",
                         marks=pytest.mark.understudy(contracts=[sf.CONTRACT],
                                                      check_verdict=s.expect is None))
            for name, s in sf.SCRIPTS.items()]


@pytest.mark.parametrize("script,want", sf_cases())
def test_salesforce_under_the_plugin(script: str, want: list[str] | None,
                                     understudy_attempt: Any,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """LangChain's Salesforce tool (simple-salesforce) plays the desk flow against the
    Salesforce integration through the forward proxy: login, Contact lookup, Case, read back."""
    for module in ("langchain_salesforce", "simple_salesforce"):
        if importlib.util.find_spec(module) is None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"{module} is not installed")
            pytest.skip(f"{module} is not installed")
    import requests

    import run_langchain_salesforce as sf
    from pytest_understudy import VerdictFailed

    a = understudy_attempt
    session = requests.Session()
    session.trust_env = False  # only this attempt's proxy, never the environment's
    session.proxies = a.proxies
    session.verify = a.ca_cert
    monkeypatch.setenv("UNDERSTUDY_URL", a.server.url)  # where the agent posts its "done"
    monkeypatch.setenv("UNDERSTUDY_ATTEMPT", a.token)
    monkeypatch.setenv("UNDERSTUDY_ATTEMPT_ID", a.attempt_id)
    d.finish("langchain", f"salesforce-{script}", sf.run(sf.SCRIPTS[script], session), None)
    ops = [e["operation_id"] for e in a.evidence()["tool_events"]]
    assert ops[0] == "soap_login", ops
    if want is None:
        assert ops == ["soap_login", "lookup_contact", "create_case", "get_case"], ops
        return
    with pytest.raises(VerdictFailed) as failed:
        a.check_verdict()
    codes = [r.split(": ", 1)[0] for r in failed.value.reasons]
    missing = [c for c in want if c not in codes]
    assert not missing, f"{missing} not among {codes}"
