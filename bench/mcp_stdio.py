"""MCP over stdio beside MCP over HTTP, one sitting (bench/mcp_stdio.sh runs it).

Sequential tools/call round trips per second for a static mock (`lookup`) and a
state-changing mock (`create_ticket`, set_state), over `understudy mcp stdio` and over
`understudy serve`'s Streamable HTTP endpoint (one keep-alive connection, session era), and
the start-up of `understudy mcp stdio` to its first answer (`initialize`), median of N runs.
"""

import http.client
import json
import os
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
SECONDS = float(os.environ.get("BENCH_SECONDS", "3"))
STARTS = int(os.environ.get("BENCH_STARTS", "7"))

LOOKUP = {
    "operation_id": "lookup", "description": "static", "annotations": {"readOnlyHint": True},
    "input_schema": {"type": "object"}, "output_schema": {"type": "object"},
    "mock": {"schema_version": 1, "default_variant": "ok",
             "variants": {"ok": {"result": {"name": "Ada", "found": True}}},
             "examples": [{"variant": "ok", "input": {}, "expected": {"name": "Ada", "found": True}}]},
}
CREATE = {
    "operation_id": "create_ticket", "description": "state-changing",
    "input_schema": {"type": "object", "properties": {"subject": {"type": "string"}}},
    "output_schema": {"type": "object"},
    "mock": {"schema_version": 1, "default_variant": "ok",
             "variants": {"ok": {"result": {"ticket_id": "T-1", "subject": {"$input": "subject"}},
                                 "set_state": {"last": {"$input": "subject"}}}},
             "examples": [{"variant": "ok", "input": {"subject": "x"},
                           "expected": {"ticket_id": "T-1", "subject": "x"}}]},
}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def project(root):
    os.makedirs(f"{root}/mocks/tools")
    for op in (LOOKUP, CREATE):
        with open(f"{root}/mocks/tools/{op['operation_id']}.json", "w") as f:
            json.dump(op, f)
    with open(f"{root}/understudy.json", "w") as f:
        json.dump({"data_dir": "data", "listen": "127.0.0.1:0",
                   "integrations": {"tools": {"profile": "mcp", "operations": "mocks/tools"}}}, f)
    return f"{root}/understudy.json"


def call(i, tool):
    args = {"subject": f"s{i}"} if tool == "create_ticket" else {}
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": args}}


def stdio_rate(config, tool):
    p = subprocess.Popen([BIN, "mcp", "stdio", "--integration", "tools", "--config", config],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    def rt(msg):
        p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()
        line = p.stdout.readline()
        assert b'"result"' in line, line
    rt(INIT)
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < SECONDS:
        n += 1
        rt(call(n, tool))
    rate = n / (time.monotonic() - t0)
    p.stdin.close()
    p.wait()
    return rate


def http_rate(addr, tool):
    host, port = addr.split(":")
    c = http.client.HTTPConnection(host, int(port))
    hdr = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    c.request("POST", "/tools", json.dumps(INIT), hdr)
    r = c.getresponse()
    sid = r.getheader("mcp-session-id")
    r.read()
    hdr = dict(hdr, **{"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"})
    c.request("POST", "/tools", '{"jsonrpc":"2.0","method":"notifications/initialized"}', hdr)
    c.getresponse().read()
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < SECONDS:
        n += 1
        c.request("POST", "/tools", json.dumps(call(n, tool)), hdr)
        body = c.getresponse().read()
        assert b'"result"' in body, body
    return n / (time.monotonic() - t0)


def start_up(config):
    times = []
    for _ in range(STARTS):
        t0 = time.monotonic()
        p = subprocess.Popen([BIN, "mcp", "stdio", "--integration", "tools", "--config", config],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        p.stdin.write((json.dumps(INIT) + "\n").encode())
        p.stdin.flush()
        p.stdout.readline()
        times.append((time.monotonic() - t0) * 1000)
        p.stdin.close()
        p.wait()
    times.sort()
    return times[len(times) // 2], times[0], times[-1]


def main():
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        stdio_cfg, http_cfg = project(a), project(b)
        out = {}
        for tool in ("lookup", "create_ticket"):
            out[f"stdio {tool}"] = stdio_rate(stdio_cfg, tool)
        srv = subprocess.Popen([BIN, "serve", "--config", http_cfg], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
        addr = srv.stdout.readline().decode().strip().rsplit("/", 1)[-1]
        try:
            for tool in ("lookup", "create_ticket"):
                out[f"http  {tool}"] = http_rate(addr, tool)
        finally:
            srv.terminate()
            srv.wait()
        med, lo, hi = start_up(stdio_cfg)
        for k, v in out.items():
            print(f"{k:24s} {v:8.0f} tools/call round trips/s (sequential, {SECONDS:.0f} s)")
        print(f"stdio start-up to first answer: median {med:.1f} ms (min {lo:.1f}, max {hi:.1f}, {STARTS} starts)")


main()
