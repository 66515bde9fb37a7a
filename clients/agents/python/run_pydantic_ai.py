"""pydantic-ai: a FunctionModel plays the script; MCPToolset(url, headers=…) reaches the desk
over MCP Streamable HTTP."""

from __future__ import annotations

import asyncio
import json

from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (ModelMessage, ModelRequest, ModelResponse, RetryPromptPart,
                                  TextPart, ToolCallPart, ToolReturnPart)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import desk_scripts as d


def results_of(messages: list[ModelMessage]) -> list[d.Result]:
    out = []
    for m in messages:
        if not isinstance(m, ModelRequest):
            continue
        for p in m.parts:
            if isinstance(p, ToolReturnPart):
                c = p.content
                text = c if isinstance(c, str) else json.dumps(c)
                out.append(d.Result(p.tool_name, text, False))
            elif isinstance(p, RetryPromptPart) and p.tool_name:
                out.append(d.Result(p.tool_name, str(p.content), True))
    return out


def run(script: d.Script) -> str:
    step = d.next_step(script)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nxt = step(results_of(messages))
        if isinstance(nxt, d.Final):
            return ModelResponse(parts=[TextPart(nxt.text)])
        return ModelResponse(parts=[ToolCallPart(nxt.tool, nxt.args)])

    if d.transport() == "stdio":
        from fastmcp.client.transports import StdioTransport
        command, args = d.stdio_command()
        toolset = MCPToolset(StdioTransport(command, args), max_retries=3)
    else:
        toolset = MCPToolset(d.mcp_url(), headers=d.headers(), max_retries=3)
    agent = Agent(FunctionModel(model), toolsets=[toolset])

    async def go() -> str:
        async with agent:
            r = await agent.run("Open a ticket for ada@example.com: refund for order 7")
            return r.output

    return asyncio.run(go())


if __name__ == "__main__":
    d.main("pydantic-ai", run)
