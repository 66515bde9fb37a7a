"""The pytest plugin: a session server, one attempt per test, the verdict as a test failure."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Generator, Optional

import pytest

from .client import Attempt, Server, VerdictFailed, find_binary

_ATTEMPT_KEY = pytest.StashKey[Attempt]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("understudy")
    g.addoption("--understudy-bin", help="the understudy binary (default: $UNDERSTUDY_BIN, then PATH)")
    g.addoption("--understudy-url", help="use a running understudy (default: $UNDERSTUDY_URL) instead of starting one")
    g.addoption("--understudy-config", help="project file for `understudy serve` (default: ini understudy_config, else ./understudy.json)")
    g.addoption("--understudy-forward-proxy", action="store_true", default=None,
                help="start serve with --forward-proxy and a throw-away CA")
    g.addoption("--understudy-report-dir", help="write each attempt's HTML report and JUnit XML here")
    parser.addini("understudy_config", "project file for `understudy serve`", default="")
    parser.addini("understudy_forward_proxy", "start serve with --forward-proxy", type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "understudy(contracts=[...], variants={...}, test_run_id=None, check_verdict=True): "
        "options of the test's understudy attempt")


@pytest.fixture(scope="session")
def understudy_config(pytestconfig: pytest.Config) -> Optional[str]:
    """The project file of the session server; override in a conftest.py per directory."""
    return pytestconfig.getoption("--understudy-config") or pytestconfig.getini("understudy_config") or None


@pytest.fixture(scope="session")
def understudy_forward_proxy(pytestconfig: pytest.Config) -> bool:
    """Whether the session server is also a forward proxy; override in a conftest.py."""
    opt = pytestconfig.getoption("--understudy-forward-proxy")
    return bool(opt) if opt is not None else bool(pytestconfig.getini("understudy_forward_proxy"))


@pytest.fixture(scope="session")
def understudy_server(pytestconfig: pytest.Config, understudy_config: Optional[str],
                      understudy_forward_proxy: bool) -> Generator[Server, None, None]:
    """`understudy serve` on a free port for the session, or the server at --understudy-url / $UNDERSTUDY_URL."""
    url = pytestconfig.getoption("--understudy-url") or os.environ.get("UNDERSTUDY_URL")
    if url:
        yield Server(url, admin_token=os.environ.get("UNDERSTUDY_ADMIN_TOKEN"),
                     forward_proxy=understudy_forward_proxy)
        return
    server = Server.start(find_binary(pytestconfig.getoption("--understudy-bin")),
                          config=understudy_config, forward_proxy=understudy_forward_proxy)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def understudy_attempt(request: pytest.FixtureRequest, understudy_server: Server) -> Generator[Attempt, None, None]:
    """One attempt for this test (options from `@pytest.mark.understudy`). After the test body
    the attempt is ended and a `fail` verdict fails the test with its reasons."""
    marker = request.node.get_closest_marker("understudy")
    kw = dict(marker.kwargs) if marker else {}
    attempt = understudy_server.create_attempt(
        test_run_id=kw.get("test_run_id") or request.node.nodeid,
        contracts=kw.get("contracts") or (),
        variants=kw.get("variants") or None,
    )
    request.node.stash[_ATTEMPT_KEY] = attempt
    try:
        yield attempt
    finally:
        try:
            attempt.end()
        finally:
            report_dir = request.config.getoption("--understudy-report-dir")
            if report_dir:
                stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid).strip("_")
                attempt.write_reports(Path(report_dir), stem)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """After a passing test body, the attempt's verdict decides: `fail` fails the test."""
    result = yield
    attempt = item.stash.get(_ATTEMPT_KEY, None)
    marker = item.get_closest_marker("understudy")
    if attempt is not None and (marker is None or marker.kwargs.get("check_verdict", True)):
        attempt.check_verdict()  # raises VerdictFailed (an AssertionError)
    return result


__all__ = ["VerdictFailed"]
