#!/usr/bin/env python3
"""Replay throughput with OpenTelemetry export off, on, and pointed at a dead endpoint, in
one sitting (bench/otel.sh). For each case: a fresh `understudy serve` of bench/project on a
free loopback port, BENCH_SECONDS of GET get_contact from BENCH_CONNS keep-alive
connections (one thread each, each request carrying a sampled traceparent), then
/metrics' span counters. Prints one JSON document."""
import http.client
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1]
SECONDS = float(os.environ.get("BENCH_SECONDS", "3"))
CONNS = int(os.environ.get("BENCH_CONNS", "4"))
ROOT = os.path.dirname(os.path.abspath(__file__))
PATH = "/crm/services/data/v60.0/sobjects/Contact/003000000000001"
TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that accepts every export (200, empty body)."""
    protocol_version = "HTTP/1.1"
    received = 0

    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        self.rfile.read(n)
        Collector.received += 1
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def load(port):
    counts = [0] * CONNS
    stop = time.monotonic() + SECONDS
    lat = []

    def worker(i):
        c = http.client.HTTPConnection("127.0.0.1", port)
        mine = []
        while time.monotonic() < stop:
            t = time.perf_counter()
            c.request("GET", PATH, headers={"traceparent": TP})
            r = c.getresponse()
            r.read()
            mine.append(time.perf_counter() - t)
            assert r.status == 200, r.status
            counts[i] += 1
        lat.extend(mine)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(CONNS)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    el = time.monotonic() - t0
    lat.sort()
    pct = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 3)
    return {"requests": sum(counts), "rps": round(sum(counts) / el, 1), "p50_ms": pct(0.5), "p99_ms": pct(0.99)}


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("GET", "/_understudy/api/metrics")
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return None


def case(name, endpoint):
    d = tempfile.mkdtemp()
    shutil.copytree(os.path.join(ROOT, "project"), os.path.join(d, "p"))
    cfg_path = os.path.join(d, "p", "understudy.json")
    cfg = json.load(open(cfg_path))
    port = free_port()
    cfg["listen"] = f"127.0.0.1:{port}"
    if endpoint:
        cfg["otel"] = {"endpoint": endpoint}
    json.dump(cfg, open(cfg_path, "w"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    srv = subprocess.Popen([BIN, "serve", "--config", cfg_path], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        out = {"case": name, **load(port)}
        time.sleep(7)  # the last batch: exported, or dropped after the 5 s export timeout
        out["spans_exported"] = metric(port, "understudy_otel_spans_exported_total")
        out["spans_dropped"] = metric(port, "understudy_otel_spans_dropped_total")
        return out
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    cport = free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", cport), Collector)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    dead = free_port()  # nothing listens there
    results = [
        case("export off", None),
        case("export on (loopback collector)", f"http://127.0.0.1:{cport}"),
        case("export to a dead endpoint", f"http://127.0.0.1:{dead}"),
    ]
    print(json.dumps({"seconds": SECONDS, "connections": CONNS, "binary": BIN,
                      "collector_requests": Collector.received, "results": results}, indent=2))


main()
