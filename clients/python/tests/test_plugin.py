"""The plugin through pytest's own pytester, against the real understudy binary."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_understudy import Server, UnderstudyError, UnderstudyUnsupported, VerdictFailed

SUITE = '''
import json, urllib.request
import pytest

def get(url):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

def test_passes(understudy_attempt):
    status, body = get(understudy_attempt.base_url("api") + "/hello")
    assert status == 200 and body == {"hi": "there"}
    assert understudy_attempt.token.startswith("ust_")

def test_verdict_fails(understudy_attempt):
    status, _ = get(understudy_attempt.base_url("api") + "/nope")
    assert status == 500   # the test body passes; the verdict does not

@pytest.mark.understudy(variants={"api/hello": "other"})
def test_variant(understudy_attempt):
    assert get(understudy_attempt.base_url("api") + "/hello")[1] == {"hi": "other"}

@pytest.mark.understudy(check_verdict=False)
def test_inspects_a_failing_attempt(understudy_attempt):
    get(understudy_attempt.base_url("api") + "/nope")
    assert understudy_attempt.evidence()["verdict"] == "fail"
'''


def run(pytester: pytest.Pytester, bin_path: str, *args: str, **env: str) -> pytest.RunResult:
    pytester.makepyfile(test_suite=SUITE)
    saved = {k: os.environ.get(k) for k in ["UNDERSTUDY_BIN", *env]}
    os.environ.update({"UNDERSTUDY_BIN": bin_path, **env})
    try:
        return pytester.runpytest_subprocess(*args)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_passing_and_failing_tests(pytester: pytest.Pytester, bin_path: str, project: Path) -> None:
    r = run(pytester, bin_path, "--understudy-config", str(project))
    r.assert_outcomes(passed=3, failed=1)
    r.stdout.fnmatch_lines(["*test_verdict_fails*", "*understudy verdict fail for attempt*",
                            "*harness error at sequence 1: unmatched_request*"])
    # a failing verdict fails the test in its call phase, not as a teardown error
    assert "ERROR at teardown" not in r.stdout.str()


def test_report_dir_gets_html_and_junit(pytester: pytest.Pytester, bin_path: str, project: Path) -> None:
    out = pytester.path / "reports"
    r = run(pytester, bin_path, "--understudy-config", str(project), f"--understudy-report-dir={out}", "-k", "passes or verdict")
    r.assert_outcomes(passed=1, failed=1)
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 4, names
    ends = ["test_suite.py_test_passes.html", "test_suite.py_test_passes.xml",
            "test_suite.py_test_verdict_fails.html", "test_suite.py_test_verdict_fails.xml"]
    assert all(n.endswith(e) for n, e in zip(names, ends)), names
    assert "Verdict: FAIL" in (out / names[2]).read_text()
    assert "<testsuite " in (out / names[1]).read_text()


def test_connects_to_a_running_server_from_UNDERSTUDY_URL(pytester: pytest.Pytester, bin_path: str, project: Path) -> None:
    server = Server.start(bin_path, config=str(project))
    try:
        r = run(pytester, "/nonexistent/understudy", "-k", "passes", UNDERSTUDY_URL=server.url)
        r.assert_outcomes(passed=1)
    finally:
        server.close()


def test_scoped_tokens_when_no_loopback_peer_is_trusted(pytester: pytest.Pytester, bin_path: str, project: Path) -> None:
    """`trust_loopback: false` and scoped tokens: a token of the `run` scope alone creates,
    ends and judges the attempt (a failing verdict still fails its test); a `read` token is
    refused with the 403 naming `run`, and no token with the 401 — each a clear failure."""
    import hashlib
    import json
    runner, reader = "plugin-run-only-7c1d", "plugin-read-only-2e9f"
    cfg = json.loads(project.read_text())
    cfg["trust_loopback"] = False
    cfg["admin_tokens"] = [
        {"name": "ci", "sha256": hashlib.sha256(runner.encode()).hexdigest(), "scopes": ["run"]},
        {"name": "viewer", "sha256": hashlib.sha256(reader.encode()).hexdigest(), "scopes": ["read"]}]
    project.write_text(json.dumps(cfg))
    server = Server.start(bin_path, config=str(project))
    try:
        r = run(pytester, "/nonexistent/understudy", "-k", "passes or verdict_fails",
                UNDERSTUDY_URL=server.url, UNDERSTUDY_ADMIN_TOKEN=runner)
        r.assert_outcomes(passed=1, failed=1)
        r.stdout.fnmatch_lines(["*understudy verdict fail for attempt*"])
        r = run(pytester, "/nonexistent/understudy", "-k", "passes",
                UNDERSTUDY_URL=server.url, UNDERSTUDY_ADMIN_TOKEN=reader)
        r.assert_outcomes(errors=1)
        r.stdout.fnmatch_lines(["*attempt creation answered 403*needs the `run` scope*"])
        r = run(pytester, "/nonexistent/understudy", "-k", "passes",
                UNDERSTUDY_URL=server.url, UNDERSTUDY_ADMIN_TOKEN="")
        r.assert_outcomes(errors=1)
        r.stdout.fnmatch_lines(["*attempt creation answered 401*"])
    finally:
        server.close()


def test_a_missing_binary_is_a_clear_error(pytester: pytest.Pytester, project: Path) -> None:
    pytester.makepyfile(test_suite=SUITE)
    r = pytester.runpytest_subprocess("--understudy-bin=/nonexistent/understudy", "--understudy-config", str(project), "-k", "passes")
    r.assert_outcomes(errors=1)


def test_the_client_against_the_real_binary(bin_path: str, project: Path) -> None:
    server = Server.start(bin_path, config=str(project))
    try:
        a = server.create_attempt(test_run_id="direct")
        assert a.base_url("api").endswith(f"/~{a.token}/api")
        with pytest.raises(KeyError, match="the project has"):
            a.base_url("nope")
        try:
            seq = a.event("caller_confirmed", kind="caller_message", text="yes", date="2026-12-01")
            assert seq == 1
        except UnderstudyUnsupported:
            pass  # a build without agent-side events (docs/src/reference/events.md)
        env = a.check_verdict()
        assert env["verdict"] == "pass" and env["ended_at"]
        with pytest.raises(UnderstudyError):
            server.create_attempt(variants={"api/nope": "x"})
        b = server.create_attempt()
        subprocess.run(["curl", "-s", "-o", "/dev/null", b.base_url("api") + "/nope"], check=True)
        with pytest.raises(VerdictFailed, match="unmatched_request"):
            b.check_verdict()
        page = server.fetch(f"/_understudy/ui/attempts/{b.attempt_id}").decode()
        assert "Verdict: FAIL" in page
    finally:
        server.close()
    assert server.process is None
