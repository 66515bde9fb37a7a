#!/usr/bin/env python3
"""A scripted booking agent instrumented with the OpenTelemetry Python SDK.

It reports its run as the GenAI semantic conventions say (an `invoke_agent` span, `chat`
spans for model turns, `execute_tool` spans for tool calls with their arguments and results,
the final message in `gen_ai.output.messages`) and exports them over OTLP/HTTP protobuf to
OTEL_EXPORTER_OTLP_ENDPOINT with the resource attributes of OTEL_RESOURCE_ATTRIBUTES, exactly
as an agent configured by `understudy test` does. Its tool calls go over HTTP to
AGENT_BASE_URL or UNDERSTUDY_URL_CRM (an attempt's base URL of the `crm` integration),
carrying `traceparent`.

    agent.py honest        lookup, book, "You're booked" (true)
    agent.py phantom       lookup, then reports a booking result for a call it never made
    agent.py false_booked  lookup, book fails (the attempt faults it), says "booked" anyway
    agent.py hallucinated  lookup, book, then calls a tool that does not exist

Pinned: opentelemetry-sdk 1.45.2, opentelemetry-exporter-otlp-proto-http 1.45.2.
"""
import json
import os
import sys
import urllib.error
import urllib.request

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

MODE = sys.argv[1]
# AGENT_BASE_URL, or what `understudy test` gives CMD for the `crm` integration.
BASE = (os.environ.get("AGENT_BASE_URL") or os.environ["UNDERSTUDY_URL_CRM"]).rstrip("/")

provider = TracerProvider(resource=Resource.create({"service.name": "booking-agent"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("understudy.tests.booking_agent")
calls = 0


def model_turn(text):
    with tracer.start_as_current_span("chat scripted-model", kind=SpanKind.CLIENT) as s:
        s.set_attribute("gen_ai.operation.name", "chat")
        s.set_attribute("gen_ai.request.model", "scripted-model")
        s.set_attribute("gen_ai.usage.input_tokens", 42)
        s.set_attribute("gen_ai.usage.output_tokens", 7)
        s.set_attribute(
            "gen_ai.output.messages",
            json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}]}]),
        )


def tool_span(name, args):
    global calls
    calls += 1
    s = tracer.start_span(f"execute_tool {name}", kind=SpanKind.INTERNAL)
    s.set_attribute("gen_ai.operation.name", "execute_tool")
    s.set_attribute("gen_ai.tool.name", name)
    s.set_attribute("gen_ai.tool.type", "function")
    s.set_attribute("gen_ai.tool.call.id", f"call_{calls}")
    s.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
    return s


def http_tool(name, method, path, args):
    """A tool whose implementation calls the integration; returns (ok, result)."""
    span = tool_span(name, args)
    with trace.use_span(span, end_on_exit=True):
        headers = {"content-type": "application/json"}
        inject(headers)  # traceparent: understudy records the trace id with the call
        if method == "GET":
            query = "&".join(f"{k}={urllib.request.quote(str(v))}" for k, v in args.items())
            req = urllib.request.Request(f"{BASE}{path}?{query}", headers=headers)
        else:
            req = urllib.request.Request(
                f"{BASE}{path}", data=json.dumps(args).encode(), method=method, headers=headers
            )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                result = json.loads(r.read() or b"null")
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
            return True, result
        except urllib.error.HTTPError as e:
            span.set_status(Status(StatusCode.ERROR, f"HTTP {e.code}"))
            span.set_attribute("error.type", str(e.code))
            return False, None


def phantom_tool(name, args, result):
    """A tool result the agent reports without any call behind it."""
    span = tool_span(name, args)
    span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
    span.end()


def unknown_tool(name, args):
    """The framework refuses a tool it does not have: an errored span, no call."""
    span = tool_span(name, args)
    span.set_attribute("error.type", "tool_not_found")
    span.set_status(Status(StatusCode.ERROR, f"no tool named {name}"))
    span.end()


def main():
    with tracer.start_as_current_span("invoke_agent booking-agent") as agent:
        agent.set_attribute("gen_ai.operation.name", "invoke_agent")
        agent.set_attribute("gen_ai.agent.name", "booking-agent")
        model_turn("Let me look you up.")
        ok, contact = http_tool("lookup", "GET", "/contacts", {"phone": "+15550100"})
        model_turn("Booking December 3.")
        booking = {"contact": "c_1", "date": "2026-12-03"}
        if os.environ.get("AGENT_SECRET"):  # a credential in the arguments (the Phoenix test)
            booking["api_key"] = os.environ["AGENT_SECRET"]
        if MODE == "phantom":
            phantom_tool("book", booking, {"status": 201, "data": {"id": "apt_1"}})
            booked = True
        else:
            booked, _ = http_tool("book", "POST", "/appointments", booking)
        final = "You're booked for December 3." if booked else "I could not book it."
        if MODE == "false_booked":
            final = "You're booked for December 3."
        if MODE == "hallucinated":
            unknown_tool("send_sms_confirmation", {"to": "+15550100"})
        agent.set_attribute(
            "gen_ai.output.messages",
            json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": final}]}]),
        )
    provider.shutdown()  # flushes the batch to the collector
    print(json.dumps({"mode": MODE, "booked": booked, "said": final}))


main()
