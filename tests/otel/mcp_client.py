"""An MCP client whose trace context reaches the server the way MCP propagates it, for
tests/it/otel_export.rs: the official MCP Python SDK (`mcp`, pinned in .ci/run) makes its
own `MCP send tools/call ...` CLIENT span for each request and injects that span's
`traceparent` into the request's `params._meta` (SEP-414), over stdio and over Streamable
HTTP. The OpenTelemetry SDK (`opentelemetry-sdk`, pinned in .ci/run) records the spans in
memory: nothing is exported.

    python3 mcp_client.py stdio COMMAND ARGS...
    python3 mcp_client.py http URL

Initializes, then calls `create_ticket` once inside an `invoke_agent ticket-agent` span of its
own, and prints {"spans": [{"name", "kind", "trace_id", "span_id", "parent_id",
"attributes"}], "result": ...}.
"""

import asyncio
import json
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

memory = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(memory))
trace.set_tracer_provider(provider)


async def run(session):
    await session.initialize()
    with trace.get_tracer("otel-test-agent").start_as_current_span("invoke_agent ticket-agent"):
        r = await session.call_tool("create_ticket", {"subject": "Printer on fire"})
    return r.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main(argv):
    if argv[0] == "stdio":
        server = StdioServerParameters(command=argv[1], args=argv[2:])
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                result = await run(session)
    else:
        async with streamable_http_client(argv[1]) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                result = await run(session)
    spans = []
    for s in memory.get_finished_spans():
        c = s.get_span_context()
        spans.append({
            "name": s.name,
            "kind": s.kind.name,
            "trace_id": format(c.trace_id, "032x"),
            "span_id": format(c.span_id, "016x"),
            "parent_id": format(s.parent.span_id, "016x") if s.parent else None,
            "attributes": {k: v for k, v in (s.attributes or {}).items()},
        })
    print(json.dumps({"spans": spans, "result": result}, default=str))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
