"""OpenAI Agents SDK: a scripted `agents.models.interface.Model` plays the script;
MCPServerStreamableHttp reaches the desk over MCP Streamable HTTP. No network, no key."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, AsyncIterator

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import Agent, Runner, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (ResponseFunctionToolCall, ResponseOutputMessage,  # noqa: E402
                                    ResponseOutputText)

import desk_scripts as d  # noqa: E402

set_tracing_disabled(True)


def get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def results_of(items: Any) -> list[d.Result]:
    if isinstance(items, str):
        return []
    names: dict[str, str] = {}
    out = []
    for it in items:
        kind = get(it, "type")
        if kind == "function_call":
            names[get(it, "call_id")] = get(it, "name")
        elif kind == "function_call_output":
            output = get(it, "output")
            text = output if isinstance(output, str) else json.dumps(output)
            err = text.startswith("An error occurred") or "Error" in text[:40]
            out.append(d.Result(names.get(get(it, "call_id"), "?"), unwrap(text), err))
    return out


def unwrap(text: str) -> str:
    """The SDK hands an MCP result to the model as the JSON of its text block (one block) or
    of the content list; give the script the block's text."""
    try:
        v = json.loads(text)
    except ValueError:
        return text
    if isinstance(v, dict) and v.get("type") == "text":
        return v.get("text", "")
    if isinstance(v, list) and v and isinstance(v[0], dict) and v[0].get("type") == "text":
        return v[0].get("text", "")
    return text


class ScriptedModel(Model):
    def __init__(self, script: d.Script):
        self.step = d.next_step(script)
        self.n = 0

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None) -> ModelResponse:
        nxt = self.step(results_of(input))
        self.n += 1
        if isinstance(nxt, d.Final):
            out = ResponseOutputMessage(
                id=f"msg_{self.n}", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text=nxt.text, annotations=[])])
        else:
            out = ResponseFunctionToolCall(
                id=f"fc_{self.n}", call_id=f"call_{self.n}", type="function_call",
                name=nxt.tool, arguments=json.dumps(nxt.args), status="completed")
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


def run(script: d.Script) -> str:
    async def go() -> str:
        if d.transport() == "stdio":
            command, args = d.stdio_command()
            server_cm: Any = MCPServerStdio(params={"command": command, "args": args},
                                            client_session_timeout_seconds=10)
        else:
            server_cm = MCPServerStreamableHttp(
                params={"url": d.mcp_url(), "headers": d.headers()},
                client_session_timeout_seconds=10)
        async with server_cm as server:
            agent = Agent(name="desk", instructions="Support desk agent",
                          model=ScriptedModel(script), mcp_servers=[server])
            r = await Runner.run(agent, "Open a ticket for ada@example.com: refund for order 7",
                                 max_turns=10)
            return str(r.final_output)

    return asyncio.run(go())


if __name__ == "__main__":
    d.main("openai-agents", run)
