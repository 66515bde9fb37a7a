"""The support-desk scripts every framework plays, and what surrounds a run.

A script is the model's side of the conversation: given the tool results the framework
handed back so far, it names the next tool call or the final answer. Every framework's
scripted model (pydantic-ai FunctionModel, an OpenAI Agents `Model`, a LangChain fake chat
model) asks `next_step`, so the four frameworks play the same scripts.

Environment (set by `understudy test` or the pytest plugin): UNDERSTUDY_URL, UNDERSTUDY_ATTEMPT,
UNDERSTUDY_ATTEMPT_ID. The MCP endpoint is `$UNDERSTUDY_URL/desk` with the header
`Understudy-Attempt: $UNDERSTUDY_ATTEMPT`.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable

EMAIL = "ada@example.com"
SUBJECT = "Refund for order 7"
# What each script must do to the verdict: `None` passes; else the verdict's reason codes
# that must be present (a contract check is `contract:<id>:<check>`).
C = "contract:create_ticket_contract:"


@dataclass
class Call:
    tool: str
    args: dict[str, Any]


@dataclass
class Final:
    text: str


Step = Callable[[list["Result"]], "Call | Final"]


@dataclass
class Result:
    """One tool result as the framework handed it to the model."""

    tool: str
    text: str  # the content as text (JSON for structured output)
    error: bool  # the framework marked it as an error (or it is a framework error message)


def customer_id(results: list[Result]) -> str:
    """The id the lookup answered: JSON inside an MCP text block."""
    for r in results:
        if r.tool == "lookup_customer" and not r.error:
            data: Any = json.loads(r.text)
            # Frameworks hand an MCP text result on as the text, a content block, or a list
            # of blocks: the script reads the JSON inside, as a model would.
            for _ in range(4):
                if isinstance(data, list) and data:
                    data = data[0]
                elif isinstance(data, dict) and "customer" not in data and "text" in data:
                    data = json.loads(data["text"])
                else:
                    break
            return data["customer"]["id"]
    raise AssertionError(f"no lookup result among {results}")


def ticket_id(results: list[Result]) -> str:
    for r in reversed(results):
        if r.tool == "create_ticket" and not r.error:
            try:
                return json.loads(r.text)["ticket_id"]
            except (ValueError, KeyError, TypeError):
                continue
    return "T-1"


# The tool results the model was last handed (what `finish` reports as `seen`).
SEEN: list[Result] = []


def _run(steps: list[Step]) -> Callable[[list[Result]], Call | Final]:
    def next_step(results: list[Result]) -> Call | Final:
        SEEN[:] = results
        i = len(results)
        if i < len(steps):
            return steps[i](results)
        return Final("done: ticket opened")

    return next_step


lookup: Step = lambda r: Call("lookup_customer", {"email": EMAIL})


def create(key: str | None, cid: str | None = None) -> Step:
    def step(r: list[Result]) -> Call:
        args = {"customer_id": cid or customer_id(r), "subject": SUBJECT}
        if key is not None:
            args["idempotency_key"] = key
        return Call("create_ticket", args)

    return step


read_back: Step = lambda r: Call("get_ticket", {"ticket_id": ticket_id(r)})


@dataclass
class Script:
    name: str
    steps: list[Step]
    expect: list[str] | None  # None: the verdict passes; else reason codes that must appear
    variant: str | None = None  # a variant the attempt must pin (`desk/create_ticket=…`)
    why: str = ""


SCRIPTS: dict[str, Script] = {
    s.name: s
    for s in [
        Script("good", [lookup, create("key-1"), read_back], None,
               why="lookup, write with the looked-up id and a key, read back, done"),
        Script("write_before_lookup", [create("key-1", cid="CUS-1042"), lookup, read_back],
               [C + "preconditions.required_before[desk/lookup_customer]"],
               why="the write comes before the lookup"),
        Script("invented_argument", [lookup, create("key-1", cid="CUS-9999"), read_back],
               [C + "arguments.sources[customer_id]"],
               why="the customer id is not the one the lookup answered"),
        Script("duplicate_without_key", [lookup, create(None), create(None), read_back],
               [C + "calls.exactly_once"],
               why="the write is sent twice without an idempotency key"),
        Script("done_after_fault", [lookup, create(None), create("fresh-key"), read_back],
               [C + "calls.exactly_once"], variant="desk/create_ticket=timeout_once",
               why="the write times out after its effect; the agent retries with a new key and says done"),
        Script("retry_same_key", [lookup, create("key-1"), create("key-1"), read_back], None,
               variant="desk/create_ticket=timeout_once",
               why="the write times out after its effect; the retry reuses the key (a replay), done"),
        Script("unknown_tool", [lookup, lambda r: Call("close_all_tickets", {})],
               [C + "tool[desk/create_ticket]"],
               why="a tool that does not exist, then a false done"),
    ]
}


def next_step(script: Script) -> Callable[[list[Result]], Call | Final]:
    return _run(script.steps)


DESK_CONFIG = str(Path(__file__).resolve().parent.parent / "desk" / "understudy.json")


def transport() -> str:
    """`http` (MCP Streamable HTTP, the default) or `stdio` (AGENT_TRANSPORT)."""
    t = os.environ.get("AGENT_TRANSPORT", "http")
    if t not in ("http", "stdio"):
        raise SystemExit(f"AGENT_TRANSPORT must be http or stdio, not {t!r}")
    return t


def stdio_command() -> tuple[str, list[str]]:
    """The command an agent's MCP configuration names for the desk over stdio: `understudy mcp
    stdio`, sent to the running test's server and attempt explicitly (MCP clients start it
    with a cleaned environment)."""
    binary = os.environ.get("UNDERSTUDY_BIN", "understudy")
    return binary, ["mcp", "stdio", "--integration", "desk", "--config", DESK_CONFIG,
                    "--url", os.environ["UNDERSTUDY_URL"],
                    "--attempt", os.environ["UNDERSTUDY_ATTEMPT"]]


def mcp_url() -> str:
    return os.environ["UNDERSTUDY_URL"].rstrip("/") + "/desk"


def headers() -> dict[str, str]:
    return {"Understudy-Attempt": os.environ["UNDERSTUDY_ATTEMPT"]}


def post_event(name: str, text: str, data: dict[str, Any] | None = None) -> None:
    """An agent-side event on the attempt (the admin API; the attempt's token authorises it)."""
    url = (os.environ["UNDERSTUDY_URL"].rstrip("/") + "/_understudy/api/attempts/"
           + os.environ["UNDERSTUDY_ATTEMPT_ID"] + "/events")
    body = json.dumps({"name": name, "kind": "agent_message", "text": text,
                       "data": data or {}}).encode()
    h = {"Content-Type": "application/json", **headers()}
    if os.environ.get("UNDERSTUDY_ADMIN_TOKEN"):  # a project whose admin API asks for one
        h["Authorization"] = "Bearer " + os.environ["UNDERSTUDY_ADMIN_TOKEN"]
    req = urllib.request.Request(url, data=body, method="POST", headers=h)
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 201, r.status


def finish(framework: str, script: str, final: str | None, error: BaseException | None) -> None:
    """After the framework's run: a final "done" is the agent telling the customer it is
    done (the event the contract's `after_success_only` reads); a framework error is printed
    as one JSON line (what the book's fault table reports) and posted as an event."""
    outcome = {"framework": framework, "script": script, "transport": transport(),
               "final": final, "error": None if error is None else f"{type(error).__name__}: {error}"[:300],
               "seen": [{"tool": r.tool, "error": r.error, "text": r.text[:160]} for r in SEEN]}
    SEEN.clear()
    print("AGENT-OUTCOME " + json.dumps(outcome), flush=True)
    if final is not None and final.startswith("done"):
        post_event("told_customer_done", final)
    elif error is not None:
        post_event("framework_error", outcome["error"] or "")


def main(framework: str, run: Callable[[Script], str]) -> None:
    """`python run_<framework>.py SCRIPT`: plays one script; exit 0 whatever the agent did
    (the verdict judges it), 2 for a usage error."""
    if len(sys.argv) != 2 or sys.argv[1] not in SCRIPTS:
        print(f"usage: {sys.argv[0]} {'|'.join(SCRIPTS)}", file=sys.stderr)
        sys.exit(2)
    script = SCRIPTS[sys.argv[1]]
    try:
        final = run(script)
        finish(framework, script.name, final, None)
    except BaseException as e:  # the framework's own failure is an outcome to report
        if isinstance(e, KeyboardInterrupt):
            raise
        finish(framework, script.name, None, e)
