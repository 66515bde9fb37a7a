"""A stdio MCP server written with the standard library only, for tests/it/mcp_stdio.rs's
`understudy mcp wrap` tests: it does what a real server may do and no SDK server does on cue.

- `weather {city}` fetches https://api.weather.test/weather/CITY with urllib, which honours
  the proxy (`HTTPS_PROXY`, `NO_PROXY`) and CA (`SSL_CERT_FILE`) variables of its environment:
  wrapped by understudy, the call goes through understudy's forward proxy.
- 0.3 s after `notifications/initialized` it sends, outside any request, a log message, a
  `notifications/tools/list_changed` and a `roots/list` request of its own.
- `seen` tells what it received: the client's answer to its `roots/list`, and the proxy and
  CA variables it was started with.
- `noisy {task}` sends a log message during the call, before its result.
- `remember {text}` is a write (no `readOnlyHint`): it appends the text to the file named by
  `CHILD_WRITES`, so a test can tell whether a write ever reached this server.
"""

import json
import os
import sys
import threading
import time
import urllib.request

lock = threading.Lock()
seen = {"roots_answer": None}

TOOLS = [
    {
        "name": "weather",
        "description": "The weather of a city, fetched over HTTPS",
        "inputSchema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "noisy",
        "description": "Logs while it works, then answers",
        "inputSchema": {
            "type": "object",
            "properties": {"task": {"type": "string"}},
            "required": ["task"],
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "remember",
        "description": "Write a note to this server's file",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "seen",
        "description": "What this server received outside any request, and its environment",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    },
]


def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def outside():
    time.sleep(0.3)
    send({"jsonrpc": "2.0", "method": "notifications/message",
          "params": {"level": "info", "logger": "child", "data": "outside any request"}})
    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    send({"jsonrpc": "2.0", "id": "child-1", "method": "roots/list"})


def result(value):
    return {"content": [{"type": "text", "text": json.dumps(value)}],
            "structuredContent": value, "isError": False}


def call(name, args):
    if name == "weather":
        url = "https://api.weather.test/weather/" + args["city"]
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return result({"status": r.status, "body": json.load(r)})
        except Exception as e:  # the agent sees why
            return {"content": [{"type": "text", "text": f"{type(e).__name__}: {e}"}],
                    "isError": True}
    if name == "noisy":
        send({"jsonrpc": "2.0", "method": "notifications/message",
              "params": {"level": "info", "logger": "child", "data": "working on " + args["task"]}})
        return result({"done": args["task"]})
    if name == "remember":
        with open(os.environ["CHILD_WRITES"], "a") as f:
            f.write(args["text"] + "\n")
        return result({"remembered": args["text"]})
    if name == "seen":
        env = {k: os.environ.get(k) for k in
               ["HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"]}
        return result({"roots_answer": seen["roots_answer"], "env": env})
    return None


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method is None:
        if mid == "child-1":
            seen["roots_answer"] = msg.get("result", msg.get("error"))
        continue
    if method == "notifications/initialized":
        threading.Thread(target=outside, daemon=True).start()
        continue
    if mid is None:
        continue
    if method == "initialize":
        res = {"protocolVersion": msg["params"]["protocolVersion"],
               "capabilities": {"tools": {"listChanged": True}, "logging": {}},
               "serverInfo": {"name": "child", "version": "1.0.0"}}
    elif method == "tools/list":
        res = {"tools": TOOLS}
    elif method == "tools/call":
        res = call(msg["params"]["name"], msg["params"].get("arguments") or {})
        if res is None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "unknown tool"}})
            continue
    elif method == "ping":
        res = {}
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": method}})
        continue
    send({"jsonrpc": "2.0", "id": mid, "result": res})
