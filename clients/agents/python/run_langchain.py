"""LangChain: `create_agent` with a GenericFakeChatModel subclass whose `bind_tools` returns
itself plays the script; langchain-mcp-adapters' MultiServerMCPClient reaches the desk over
MCP Streamable HTTP (it opens a session per tool call)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_mcp_adapters.client import MultiServerMCPClient

import desk_scripts as d

SCRIPT: d.Script | None = None


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                return block.get("text", "")
    return json.dumps(content)


class ScriptedChat(GenericFakeChatModel):
    """Answers from the script; the tool results are the ToolMessages so far."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChat":
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        assert SCRIPT is not None
        results = [d.Result(m.name or "?", text_of(m.content), m.status == "error")
                   for m in messages if isinstance(m, ToolMessage)]
        nxt = d.next_step(SCRIPT)(results)
        if isinstance(nxt, d.Final):
            msg = AIMessage(content=nxt.text)
        else:
            msg = AIMessage(content="", tool_calls=[
                {"name": nxt.tool, "args": nxt.args, "id": f"call_{len(results) + 1}",
                 "type": "tool_call"}])
        return ChatResult(generations=[ChatGeneration(message=msg)])


def run(script: d.Script) -> str:
    global SCRIPT
    SCRIPT = script

    async def go() -> str:
        if d.transport() == "stdio":
            command, args = d.stdio_command()
            conn: dict[str, Any] = {"transport": "stdio", "command": command, "args": args}
        else:
            conn = {"transport": "streamable_http", "url": d.mcp_url(), "headers": d.headers()}
        client = MultiServerMCPClient({"desk": conn})
        tools = await client.get_tools()
        agent = create_agent(ScriptedChat(messages=iter([])), tools)
        out = await agent.ainvoke(
            {"messages": [{"role": "user",
                           "content": "Open a ticket for ada@example.com: refund for order 7"}]})
        return text_of(out["messages"][-1].content)

    return asyncio.run(go())


if __name__ == "__main__":
    d.main("langchain", run)
