"""The official MCP Python SDK's stdio client (`mcp`, pinned in .ci/run) against a stdio
server, for tests/it/mcp_stdio.rs.

    python3 python_client.py PLAN_JSON

PLAN: {"command": ..., "args": [...], "env": {...}?, "cwd": ...?, "era": "legacy"|"modern",
       "calls": [{"name": ..., "arguments": {...}}], "elicit": {"action": ..., "content": {...}}?}

The SDK starts the server itself, with its cleaned environment (HOME, LOGNAME, PATH, SHELL,
TERM, USER plus the plan's `env`). `legacy` runs `initialize`; `modern` runs `server/discover`
(2026-07-28). Prints one JSON object: {"version", "tools", "results", "logs", "elicitations"}.
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

    server = StdioServerParameters(
        command=plan["command"], args=plan["args"], env=plan.get("env"), cwd=plan.get("cwd")
    )
    async with stdio_client(server) as (read, write):
        async with ClientSession(
            read, write, logging_callback=on_log, elicitation_callback=on_elicit
        ) as session:
            if plan["era"] == "modern":
                await session.discover()
            else:
                await session.initialize()
            tools = await session.list_tools()
            results = []
            for call in plan.get("calls", []):
                r = await session.call_tool(call["name"], call.get("arguments") or {})
                results.append(r.model_dump(mode="json", by_alias=True, exclude_none=True))
            out = {
                "version": session.protocol_version,
                "tools": sorted(t.name for t in tools.tools),
                "results": results,
                "logs": logs,
                "elicitations": elicitations,
            }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
