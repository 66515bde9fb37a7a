"""What each framework does under each fault kind, measured: prints the table of
docs/src/guides/frameworks.md (and of each framework's page).

For every framework and every fault kind an MCP tool call can take, one attempt of the desk
project with that fault on the first `desk/create_ticket` call (`after_effect: true`: the
ticket is opened, only the answer is lost or spoiled; `times: 1`), played by the
`retry_same_key` script (lookup, the write with key `key-1`, the same write again with the
same key, read back, "done"). A framework that hands the model the failure as a tool result
lets the script retry (an idempotent replay) and the verdict passes; one whose run ends at
the fault leaves the ticket unread (`order[in_order]`); one that sends nothing for `--hang`
seconds after the faulted write (plus the fault's own delay) and has not ended is killed. Each cell says what the framework did, what the model was handed for the
faulted call, and the verdict.

Run (the same environment as the matrix; a few minutes, the runs are sequential):
    UNDERSTUDY_BIN=target/debug/understudy AGENTS_JS_DIR=target/agents-js \
    PYTHONPATH=clients/python/src target/agents-venv/bin/python \
        clients/agents/python/fault_table.py [--transport http|stdio] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pytest_understudy.client import Server, find_binary

HERE = Path(__file__).resolve().parent
DESK = HERE.parent / "desk" / "understudy.json"
JS_DIR = Path(os.environ.get("AGENTS_JS_DIR", HERE.parent / "js"))
RUNNERS = {
    "pydantic-ai": [sys.executable, str(HERE / "run_pydantic_ai.py")],
    "openai-agents": [sys.executable, str(HERE / "run_openai_agents.py")],
    "langchain": [sys.executable, str(HERE / "run_langchain.py")],
    "vercel-ai": ["node", str(JS_DIR / "run_vercel_ai.mjs")],
}
# The fault kinds of an MCP tool call (docs/src/reference/faults.md), with the parameters used.
KINDS: dict[str, dict[str, Any]] = {
    "reset": {},
    "close": {},
    "timeout": {"ms": 1500},
    "stream_cut": {},
    "malformed_body": {},
    "slow_body": {"ms": 1000, "chunks": 5},
    "status": {"status": 503},
    "jsonrpc_error": {"code": -32000, "message": "fault injected"},
}
SCRIPT = "retry_same_key"


def measure(server: Server, framework: str, kind: str, transport: str, hang: float) -> dict[str, Any]:
    fault = {"kind": kind, "after_effect": True, "times": 1, **KINDS[kind]}
    status, created = server.request("POST", "/_understudy/api/attempts", {
        "test_run_id": f"faults-{framework}-{kind}-{transport}",
        "contracts": ["create_ticket_contract"], "faults": {"desk/create_ticket": fault}})
    if status != 201:
        raise SystemExit(f"attempt creation answered {status}: {created}")
    env = dict(os.environ, UNDERSTUDY_URL=server.url, UNDERSTUDY_ATTEMPT=created["token"],
               UNDERSTUDY_ATTEMPT_ID=created["attempt_id"], AGENT_TRANSPORT=transport,
               DESK_CONFIG=str(DESK), UNDERSTUDY_BIN=find_binary())
    started = time.monotonic()
    outcome: dict[str, Any] | None = None
    # A hang is measured from the faulted write's arrival (the framework's start-up time,
    # which a loaded machine stretches, does not count): `hang` seconds after it, plus the
    # fault's own `ms`, with the process still running and nothing more arriving.
    p = subprocess.Popen(RUNNERS[framework] + [SCRIPT], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=HERE)
    last_seen, last_count = None, 0
    grace = hang + KINDS[kind].get("ms", 0) / 1000
    while p.poll() is None:
        time.sleep(0.5)
        _, ev = server.request("GET", f"/_understudy/api/attempts/{created['attempt_id']}/evidence")
        calls = [e for e in (ev or {}).get("tool_events", []) if e["operation_id"] == "create_ticket"]
        n = len((ev or {}).get("tool_events", []))
        if calls and n != last_count:
            last_seen, last_count = time.monotonic(), n
        if (last_seen and time.monotonic() - last_seen > grace) or time.monotonic() - started > 300:
            p.kill()
            p.communicate()
            outcome = {"hang": True}
            break
    if outcome is None:
        stdout, stderr = p.communicate()
        for line in stdout.splitlines():
            if line.startswith("AGENT-OUTCOME "):
                outcome = json.loads(line[len("AGENT-OUTCOME "):])
        if outcome is None:
            outcome = {"error": f"no outcome (exit {p.returncode}): {(stderr or stdout)[-200:]}"}
    hung_for = round(time.monotonic() - last_seen, 1) if last_seen else None
    seconds = time.monotonic() - started
    server.request("DELETE", f"/_understudy/api/attempts/{created['attempt_id']}")
    _, ev = server.request("GET", f"/_understudy/api/attempts/{created['attempt_id']}/evidence")
    creates = [e for e in ev["tool_events"] if e["operation_id"] == "create_ticket"]
    return {"framework": framework, "kind": kind, "transport": transport, "seconds": round(seconds, 1),
            "after_last_call": hung_for,
            "outcome": outcome, "verdict": ev["verdict"],
            "reasons": [r["code"] for r in ev["verdict_reasons"]],
            "create_calls": [e["result_status"] for e in creates]}


def cell(m: dict[str, Any]) -> str:
    o = m["outcome"]
    if o.get("hang"):
        did = f"**hangs** (nothing for {m['after_last_call']:.0f} s after the write; killed)"
    elif o.get("error"):
        did = f"run ends: `{o['error'].split(':')[0]}`"
    else:
        seen = [r for r in o.get("seen", []) if r["tool"] == "create_ticket"]
        first = seen[0] if seen else None
        if first is None:
            did = "the model gets no result for the write"
        else:
            text = " ".join(first["text"].split())
            text = text if len(text) <= 48 else text[:45] + "…"
            did = ("a tool error" if first["error"] else "a tool result") + f" to the model (`{text}`)"
    verdict = "pass" if m["verdict"] == "pass" else "fail: `" + m["reasons"][0].split(":", 2)[-1] + "`"
    return f"{did}; {verdict}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", default="http", choices=["http", "stdio"])
    ap.add_argument("--hang", type=float, default=20.0,
                    help="seconds without a call after the faulted write before a run counts as hung")
    ap.add_argument("--json", help="also write the measurements here")
    ap.add_argument("--framework", action="append", help="only these (repeatable)")
    ap.add_argument("--kind", action="append", help="only these fault kinds (repeatable)")
    ap.add_argument("--from-json", help="print the table of measurements saved with --json")
    a = ap.parse_args()
    frameworks = a.framework or list(RUNNERS)
    kinds = a.kind or list(KINDS)
    rows: list[dict[str, Any]] = []
    if a.from_json:
        rows = json.loads(Path(a.from_json).read_text())
        a.transport = rows[0]["transport"]
        frameworks = [f for f in frameworks if any(r["framework"] == f for r in rows)]
        kinds = [k for k in kinds if any(r["kind"] == k for r in rows)]
    else:
        server = Server.start(find_binary(), config=str(DESK))
        try:
            for kind in kinds:
                for fw in frameworks:
                    m = measure(server, fw, kind, a.transport, a.hang)
                    print(json.dumps(m), file=sys.stderr, flush=True)
                    rows.append(m)
        finally:
            server.close()
    if a.json and not a.from_json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    print(f"| fault kind ({a.transport}) | " + " | ".join(frameworks) + " |")
    print("|---" * (len(frameworks) + 1) + "|")
    for kind in kinds:
        params = ", ".join(f"{k} {v}" for k, v in KINDS[kind].items())
        label = f"`{kind}`" + (f" ({params})" if params else "")
        print(f"| {label} | " + " | ".join(
            cell(next(r for r in rows if r["kind"] == kind and r["framework"] == fw))
            for fw in frameworks) + " |")


if __name__ == "__main__":
    main()
