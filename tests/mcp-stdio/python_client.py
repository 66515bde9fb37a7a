"""The official MCP Python SDK's stdio client (`mcp`, pinned in .ci/run) against a stdio
server, for tests/it/mcp_stdio.rs.

    python3 python_client.py PLAN_JSON

PLAN: {"command": ..., "args": [...], "env": {...}?, "cwd": ...?, "era": "legacy"|"modern",
       "calls": [{"name": ..., "arguments": {...}}], "elicit": {"action": ..., "content": {...}}?,
       "roots": [{"uri": ..., "name": ...}]?, "pause": SECONDS?, "timeout": SECONDS?,
       "ping_after_error": bool?}

`roots`: what the client answers to the server's `roots/list`. `pause`: sleep after
`tools/list`, before the calls (messages the server sends outside any request arrive then).
`timeout`: the SDK's read timeout of each call; a call that fails (timeout, closed
connection, JSON-RPC error) is reported as {"raised": TYPE, "message": ...} and the next calls
still run (each may fail the same way: a closed session stays closed).

The SDK starts the server itself, with its cleaned environment (HOME, LOGNAME, PATH, SHELL,
TERM, USER plus the plan's `env`). `legacy` runs `initialize`; `modern` runs `server/discover`
(2026-07-28). Prints one JSON object: {"version", "tools", "results", "logs", "elicitations",
"notifications", "roots_asked"}.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client


async def main(plan):
    logs = []
    elicitations = []

    async def on_log(params):
        logs.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def on_elicit(context, params):
        elicitations.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        e = plan.get("elicit") or {"action": "decline"}
        return types.ElicitResult(action=e["action"], content=e.get("content"))

    out = {}
    server = StdioServerParameters(
        command=plan["command"], args=plan["args"], env=plan.get("env"), cwd=plan.get("cwd")
    )
    try:
        await session_run(plan, server, out, logs, elicitations, on_log, on_elicit)
    except BaseException as e:  # noqa: BLE001 - a closed session may fail the exit too
        if not out:
            raise
        out["exit_error"] = type(e).__name__
    print(json.dumps(out))


async def session_run(plan, server, out, logs, elicitations, on_log, on_elicit):
    notifications = []
    roots_asked = []

    async def on_message(message):
        if isinstance(message, Exception):
            notifications.append({"exception": repr(message)})
            return
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method:
            notifications.append(method)

    async def on_roots(context):
        roots_asked.append(True)
        return types.ListRootsResult(roots=[types.Root(**r) for r in plan.get("roots", [])])

    async with stdio_client(server) as (read, write):
        extra = {}
        if "roots" in plan:
            extra["list_roots_callback"] = on_roots
        async with ClientSession(
            read,
            write,
            logging_callback=on_log,
            elicitation_callback=on_elicit,
            message_handler=on_message,
            **extra,
        ) as session:
            if plan["era"] == "modern":
                await session.discover()
            else:
                await session.initialize()
            tools = await session.list_tools()
            if plan.get("pause"):
                await asyncio.sleep(plan["pause"])
            results = []
            for call in plan.get("calls", []):
                try:
                    r = await session.call_tool(
                        call["name"],
                        call.get("arguments") or {},
                        read_timeout_seconds=plan.get("timeout"),
                    )
                except Exception as e:  # noqa: BLE001 - the test asserts what the client saw
                    results.append({"raised": type(e).__name__, "message": str(e)})
                    continue
                results.append(r.model_dump(mode="json", by_alias=True, exclude_none=True))
            out.update({
                "version": session.protocol_version,
                "tools": sorted(t.name for t in tools.tools),
                "results": results,
                "logs": logs,
                "elicitations": elicitations,
                "notifications": notifications,
                "roots_asked": len(roots_asked),
            })


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
