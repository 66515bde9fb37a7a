// A stdio↔HTTP bridge for running the MCP conformance suite against `understudy mcp stdio`:
// the suite's runner takes only a URL (`conformance server --url`), never a command, so this
// process serves Streamable HTTP on a loopback port and relays every message, unchanged, as a
// line to a stdio server it starts — one stdio process per MCP session, as an agent starts
// one per session. Used by scripts/mcp-conformance.sh (CONFORMANCE_TRANSPORT=stdio).
//
//   node mcp-conformance-stdio-bridge.mjs -- CMD ARGS...
//
// Prints `bridge listening on http://127.0.0.1:PORT/mcp` once ready. `{session}` in ARGS is
// replaced by the process's number (1, 2, …): standalone stdio servers of one project cannot
// share a data dir at the same time, so each gets its own (`--data-dir DIR/{session}`).
// - POST `initialize` without `Mcp-Session-Id`: a new stdio process; the answer carries a new
//   `Mcp-Session-Id`. A POST with that header goes to its process; without one (2026-07-28,
//   no sessions) to one shared process.
// - A request is written as one line; the answer is an SSE stream of the process's lines up
//   to the response with the request's id (notifications and server-to-client requests sent
//   meanwhile go on it). A notification or a response of the client: written, 202.
// - GET with a session: an SSE stream of what the process sends while no request waits.
// - DELETE: the process's stdin is closed (it exits), 200. Unknown session: 404.
// Only the line framing changes: HTTP-only things (status codes, headers such as
// MCP-Protocol-Version or Mcp-Method) are not carried over stdio.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import http from "node:http";

const sep = process.argv.indexOf("--");
const command = sep >= 0 ? process.argv.slice(sep + 1) : [];
if (command.length === 0) {
  console.error("usage: node mcp-conformance-stdio-bridge.mjs -- CMD ARGS...");
  process.exit(2);
}

const sessions = new Map(); // session id -> Child
let shared = null;
let started = 0;

class Child {
  constructor() {
    started += 1;
    const args = command.slice(1).map((a) => a.replaceAll("{session}", String(started)));
    this.proc = spawn(command[0], args, { stdio: ["pipe", "pipe", "inherit"] });
    this.waiting = []; // [key, sink]
    this.listener = null;
    this.kept = [];
    this.closed = false;
    let buf = "";
    this.proc.stdout.setEncoding("utf8");
    this.proc.stdout.on("data", (chunk) => {
      buf += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) this.deliver(line);
      }
    });
    this.proc.on("exit", () => {
      this.closed = true;
      for (const [, sink] of this.waiting) sink.end();
      this.waiting = [];
      if (this.listener) this.listener.end();
    });
    this.proc.stdin.on("error", () => {});
  }
  deliver(line) {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      msg = null; // not JSON: relayed as it came, to whoever waits
    }
    if (msg && msg.method === undefined && msg.id !== undefined) {
      const key = JSON.stringify(msg.id);
      const i = this.waiting.findIndex(([k]) => k === key);
      if (i >= 0) {
        const [, sink] = this.waiting.splice(i, 1)[0];
        sink.event(line);
        sink.end();
      }
      return;
    }
    const last = this.waiting[this.waiting.length - 1];
    if (last) last[1].event(line);
    else if (this.listener) this.listener.event(line);
    else this.kept.push(line);
  }
  write(msg) {
    if (this.closed) return false;
    this.proc.stdin.write(JSON.stringify(msg) + "\n");
    return true;
  }
}

function sse(res, headers = {}) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...headers });
  let open = true;
  res.on("close", () => (open = false));
  return {
    event: (line) => open && res.write(`event: message\ndata: ${line}\n\n`),
    end: () => open && res.end(),
  };
}

const server = http.createServer((req, res) => {
  const sid = req.headers["mcp-session-id"];
  if (req.method === "GET" || req.method === "DELETE") {
    const child = sid && sessions.get(sid);
    if (!child) return res.writeHead(sid ? 404 : 405).end();
    if (req.method === "DELETE") {
      child.proc.stdin.end();
      sessions.delete(sid);
      return res.writeHead(200).end();
    }
    const sink = sse(res);
    for (const line of child.kept.splice(0)) sink.event(line);
    child.listener = sink;
    return;
  }
  if (req.method !== "POST") return res.writeHead(405).end();
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    let msg;
    try {
      msg = JSON.parse(body);
    } catch {
      return res.writeHead(400, { "content-type": "application/json" }).end(
        JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }),
      );
    }
    let child;
    let minted;
    if (msg.method === "initialize" && !sid) {
      child = new Child();
      minted = randomUUID();
      sessions.set(minted, child);
    } else if (sid) {
      child = sessions.get(sid);
      if (!child) return res.writeHead(404).end();
    } else {
      shared = shared && !shared.closed ? shared : new Child();
      child = shared;
    }
    const isRequest = msg.method !== undefined && msg.id !== undefined && msg.id !== null;
    if (!isRequest) {
      return res.writeHead(child.write(msg) ? 202 : 502).end();
    }
    const sink = sse(res, minted ? { "mcp-session-id": minted } : {});
    for (const line of child.kept.splice(0)) sink.event(line);
    child.waiting.push([JSON.stringify(msg.id), sink]);
    if (!child.write(msg)) sink.end();
  });
});

server.listen(0, "127.0.0.1", () => {
  console.log(`bridge listening on http://127.0.0.1:${server.address().port}/mcp`);
});
const stop = () => {
  for (const c of sessions.values()) c.proc.stdin.end();
  if (shared) shared.proc.stdin.end();
  server.close();
  setTimeout(() => process.exit(0), 500).unref();
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
