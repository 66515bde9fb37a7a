#!/usr/bin/env python3
"""bench/crashloop.py: kill -9 under load, TRIALS times, and count what survived (not CI).

Each trial starts the release `understudy serve` on the same data dir, reads back the evidence
of the previous trial's attempts, creates ATTEMPTS new attempts, runs CONNS keep-alive
connections of calls spread over them (POST /~<token>/api/counter {"n": <unique n>}: every call
also changes the attempt's state; connection i sends its k-th call to attempt i + k·CONNS mod
ATTEMPTS, so with more attempts than connections every attempt is written and, under a low
NOFILE, evidence files are closed and reopened under load) and sends SIGKILL at a random moment (uniform in
KILL_MIN_S..KILL_MAX_S after the load starts). After the last trial the server starts once more,
reads the last trial back and then every attempt of every trial again, and stops (SIGTERM).

"Acknowledged": the client read a whole 200 answer for the call. "Present": that call's `n` is
in its attempt's `tool_events` read back after the restart. An attempt "reads back" when
GET /_understudy/api/attempts/{id}/evidence answers 200 with sequences 1..k (no gap, no repeat).
Calls present but never acknowledged (in flight at the kill) are allowed and counted.

Output: ONE JSON line on stdout (progress on stderr); `ok` is true when nothing acknowledged
was lost and every attempt read back. Exit status 0 when ok, 1 otherwise.

Knobs (env): TRIALS (100) CONNS (64) ATTEMPTS (16, per trial) KILL_MIN_S (0.05) KILL_MAX_S (2.0)
SEED (random; printed) NOFILE (the server's open-files limit; default: inherited)
BUILD (1: `nice cargo build --release` first; 0: skip) BIN (default: $CARGO_TARGET_DIR or
./target, release) KEEP=1 (keep the work dir) STARTUP_TIMEOUT (60 s).

FLEET=1: the same against a fleet — a PostgreSQL server started here (initdb in the work dir,
fsync on) and TWO `understudy serve` processes on it. Each call goes to the process its attempt
is routed to (attempt j → process j mod 2, as nginx's `hash … consistent` keeps an attempt on
one process); at the random moment ONE of the two (chosen at random) gets SIGKILL, the
connections that were on it move to the survivor, and the load goes on for SURVIVE_S (1.5) s
more. "Served by the survivor" is measured per attempt of the killed process: from the kill
to the survivor's first 200 answer for it (`takeover_ms`, max over every trial; the promise is
< 1000). The killed process is started again for the next trial. Evidence is read back
through a live process; after the last trial a fresh process reads everything back.

Stdlib only: the load generator is asyncio over raw HTTP/1.1.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRIALS = int(os.environ.get("TRIALS", "100"))
CONNS = int(os.environ.get("CONNS", "64"))
ATTEMPTS = int(os.environ.get("ATTEMPTS", "16"))
KILL_MIN_S = float(os.environ.get("KILL_MIN_S", "0.05"))
KILL_MAX_S = float(os.environ.get("KILL_MAX_S", "2.0"))
SEED = int(os.environ.get("SEED", str(random.SystemRandom().randrange(1 << 32))))
NOFILE = os.environ.get("NOFILE")
BUILD = os.environ.get("BUILD", "1") == "1"
KEEP = os.environ.get("KEEP", "0") == "1"
STARTUP_TIMEOUT = float(os.environ.get("STARTUP_TIMEOUT", "60"))
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.environ.get("BIN", os.path.join(TARGET_DIR, "release", "understudy"))

COUNTER_OP = {
    "operation_id": "bump",
    "description": "Swap the counter: answer the old value, store n",
    "match": {"method": "POST", "path": "/counter"},
    "input_schema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}},
    "output_schema": {"type": "object", "required": ["status", "data"]},
    "mock": {
        "schema_version": 1,
        "default_variant": "ok",
        "initial_state": {"counter": -1},
        "variants": {"ok": {
            "result": {"status": 200, "data": {"previous": {"$state": "counter"}}},
            "set_state": {"counter": {"$input": "n"}},
        }},
        "examples": [{"variant": "ok", "input": {"n": 1},
                      "expected": {"status": 200, "data": {"previous": -1}}}],
    },
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- the server -----------------------------------------------------------------------------

class Server:
    """`understudy serve` on 127.0.0.1:0; stdout stays open (the readiness line came on it)."""

    def __init__(self, config: str, stderr_path: str):
        def limit():
            if NOFILE:
                n = int(NOFILE)
                resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

        self.stderr = open(stderr_path, "ab")
        self.proc = subprocess.Popen(
            [BIN, "serve", "--config", config, "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=self.stderr, preexec_fn=limit,
            env={k: v for k, v in os.environ.items() if k != "UNDERSTUDY_ADMIN_TOKEN"},
        )
        ready, _, _ = select.select([self.proc.stdout], [], [], STARTUP_TIMEOUT)
        line = self.proc.stdout.readline().decode() if ready else ""
        prefix = "understudy listening on http://"
        if not line.startswith(prefix):
            self.kill()
            raise RuntimeError(f"no readiness line ({line!r}); see {stderr_path}")
        host, port = line[len(prefix):].strip().rsplit(":", 1)
        self.addr = (host, int(port))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.stderr.close()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=120)
        self.stderr.close()
        return code


# ---- HTTP/1.1 over asyncio --------------------------------------------------------------------

class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, addr=None):
        self.reader, self.writer = reader, writer
        # The listener's own name with its port (the server refuses other Host names).
        self.host = f"{addr[0]}:{addr[1]}" if addr else "127.0.0.1"

    @classmethod
    async def open(cls, addr) -> "Conn":
        return cls(*await asyncio.open_connection(*addr), addr)

    async def request(self, method: str, path: str, body: object = None) -> tuple[int, bytes]:
        data = b"" if body is None else json.dumps(body).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
        self.writer.write(head.encode() + data)
        await self.writer.drain()
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.strip().lower(): v.strip()
                   for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
        if headers.get("transfer-encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                out += chunk[:-2]
            return status, out
        return status, await self.reader.readexactly(int(headers.get("content-length", "0")))

    def close(self) -> None:
        self.writer.close()


async def create_attempts(addr, n: int) -> list[tuple[str, str]]:
    c = await Conn.open(addr)
    out = []
    for _ in range(n):
        status, body = await c.request("POST", "/_understudy/api/attempts", {})
        if status != 201:
            raise RuntimeError(f"attempt creation answered {status}: {body[:300]!r}")
        v = json.loads(body)
        out.append((v["attempt_id"], v["token"]))
    c.close()
    return out


async def load_until_killed(server: Server, attempts, next_n: list[int], delay: float,
                            failures: list[str]):
    """CONNS connections of calls over `attempts` until SIGKILL lands `delay` s in; returns
    {attempt_id: [acknowledged n]} and how many calls were sent. An answer other than the
    counter's 200 goes to `failures` and ends that connection's loop."""
    acked: dict[str, list[int]] = {a: [] for a, _ in attempts}
    sent = 0

    async def client(i: int):
        nonlocal sent
        k = i  # connection i's calls go to attempts i, i + CONNS, i + 2 CONNS, … (mod the count)
        try:
            c = await Conn.open(server.addr)
        except OSError:
            return
        try:
            while True:
                attempt_id, token = attempts[k % len(attempts)]
                path = f"/~{token}/api/counter"
                k += CONNS
                n = next_n[0]
                next_n[0] += 1
                sent += 1
                status, body = await c.request("POST", path, {"n": n})
                if status != 200 or b'"previous"' not in body:
                    failures.append(f"call {n} answered {status}: {body[:300]!r}")
                    return
                acked[attempt_id].append(n)
        except (OSError, asyncio.IncompleteReadError, ConnectionError):
            pass  # the kill
        finally:
            c.close()

    loop = asyncio.get_running_loop()
    loop.call_later(delay, lambda: os.kill(server.proc.pid, signal.SIGKILL))
    await asyncio.gather(*(client(i) for i in range(CONNS)))
    server.kill()
    return acked, sent


async def read_back(addr, acked: dict[str, list[int]], tally: dict) -> None:
    """Reads every attempt in `acked` back and adds to `tally`."""
    c = await Conn.open(addr)
    for attempt_id, ns in acked.items():
        status, body = await c.request("GET", f"/_understudy/api/attempts/{attempt_id}/evidence")
        recorded: set[int] = set()
        readable = status == 200
        if readable:
            events = json.loads(body).get("tool_events", [])
            readable = [e.get("sequence") for e in events] == list(range(1, len(events) + 1))
            recorded = {e["arguments"]["n"] for e in events}
        else:
            tally["errors"].append(f"evidence of {attempt_id}: {status} {body[:300]!r}")
        tally["attempts"] += 1
        tally["attempts_read_back"] += readable
        present = [n for n in ns if n in recorded]
        tally["acknowledged"] += len(ns)
        tally["present"] += len(present)
        tally["unacknowledged_present"] += len(recorded) - len(present)
        lost = sorted(set(ns) - recorded)
        if lost:
            tally["errors"].append(f"attempt {attempt_id}: {len(lost)} acknowledged calls "
                                   f"missing, first {lost[:10]}")
    c.close()


def new_tally() -> dict:
    return {"attempts": 0, "attempts_read_back": 0, "acknowledged": 0, "present": 0,
            "unacknowledged_present": 0, "errors": []}


def filesystem_of(path: str) -> str:
    best, fs = "", "unknown"
    with open("/proc/mounts") as f:
        for line in f:
            _, mnt, kind = line.split()[:3]
            if path.startswith(mnt) and len(mnt) > len(best):
                best, fs = mnt, kind
    return fs


def main() -> int:
    if os.environ.get("FLEET", "0") == "1":
        return fleet_main()
    if BUILD:
        log("nice cargo build --release")
        subprocess.run(["nice", "cargo", "build", "--release"], cwd=ROOT, check=True,
                       stdout=sys.stderr)
    work = tempfile.mkdtemp(prefix="understudy-crashloop.", dir=os.environ.get("TMPDIR"))
    os.makedirs(os.path.join(work, "mocks", "api"))
    with open(os.path.join(work, "mocks", "api", "bump.json"), "w") as f:
        json.dump(COUNTER_OP, f)
    config = os.path.join(work, "understudy.json")
    with open(config, "w") as f:
        json.dump({"data_dir": "data", "integrations": {
            "api": {"profile": "rest", "operations": "mocks/api"}}}, f)
    stderr_path = os.path.join(work, "server.log")
    rng = random.Random(SEED)
    started = time.monotonic()
    tally = new_tally()
    every: dict[str, list[int]] = {}
    previous: dict[str, list[int]] = {}
    delays, calls, start_failures = [], [], 0
    next_n = [0]
    ok_run = True
    try:
        for trial in range(TRIALS + 1):
            try:
                server = Server(config, stderr_path)
            except RuntimeError as e:
                start_failures += 1
                tally["errors"].append(f"trial {trial}: the server did not start: {e}")
                ok_run = False
                break
            asyncio.run(read_back(server.addr, previous, tally))
            if trial == TRIALS:
                # The end: every attempt of every trial once more, then a clean stop.
                final = new_tally()
                asyncio.run(read_back(server.addr, every, final))
                tally["final_recheck"] = {k: final[k] for k in
                                          ("attempts", "attempts_read_back", "acknowledged",
                                           "present")}
                tally["errors"] += final["errors"]
                tally["stop_exit"] = server.stop()
                break
            attempts = asyncio.run(create_attempts(server.addr, ATTEMPTS))
            delay = rng.uniform(KILL_MIN_S, KILL_MAX_S)
            acked, sent = asyncio.run(load_until_killed(server, attempts, next_n, delay,
                                                         tally["errors"]))
            delays.append(delay)
            calls.append(sent)
            previous = acked
            every.update(acked)
            log(f"trial {trial + 1}/{TRIALS}: kill -9 after {delay * 1000:.0f} ms, "
                f"{sum(len(v) for v in acked.values())} acknowledged of {sent} sent")
    finally:
        if not KEEP:
            shutil.rmtree(work, ignore_errors=True)
    lost = tally["acknowledged"] - tally["present"]
    unreadable = tally["attempts"] - tally["attempts_read_back"]
    ok = ok_run and lost == 0 and unreadable == 0 and not tally["errors"]
    out = {
        "bench": "crashloop",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "trials": len(delays),
        "connections": CONNS,
        "attempts_per_trial": ATTEMPTS,
        "seed": SEED,
        "nofile": int(NOFILE) if NOFILE else resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "acknowledged": tally["acknowledged"],
        "present": tally["present"],
        "lost": lost,
        "unacknowledged_present": tally["unacknowledged_present"],
        "attempts": tally["attempts"],
        "attempts_read_back": tally["attempts_read_back"],
        "final_recheck": tally.get("final_recheck"),
        "start_failures": start_failures,
        "kill_after_ms": {"min": round(min(delays, default=0) * 1000),
                          "max": round(max(delays, default=0) * 1000)},
        "calls_sent_per_trial": {"min": min(calls, default=0),
                                 "median": statistics.median(calls) if calls else 0,
                                 "max": max(calls, default=0)},
        "stop_exit": tally.get("stop_exit"),
        "data_dir_fs": filesystem_of(work),
        "wall_s": round(time.monotonic() - started, 1),
        "errors": tally["errors"][:10],
        "ok": ok,
    }
    print(json.dumps(out))
    return 0 if ok else 1


# ---- FLEET=1: two processes on one PostgreSQL -------------------------------------------------

SURVIVE_S = float(os.environ.get("SURVIVE_S", "1.5"))


def start_postgres(work: str) -> tuple[str, callable]:
    """initdb + pg_ctl start on a free port (as `pgtest` when root); returns (url, stop)."""
    import glob
    import pwd
    import socket
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: [int(x) for x in p.split("/")[4].split(".") if x.isdigit()])
    if not bins:
        raise RuntimeError("PostgreSQL is required (apt-get install postgresql)")
    pgbin = bins[-1]
    root = os.getuid() == 0
    user = "pgtest" if root else pwd.getpwuid(os.getuid()).pw_name
    if root:
        subprocess.run(["id", user], capture_output=True).returncode == 0 or subprocess.run(["useradd", "-m", user], check=True)
    pre = ["runuser", "-u", user, "--"] if root else []
    data = os.path.join(work, "pg")
    os.makedirs(data)
    if root:
        shutil.chown(work, user)
        shutil.chown(data, user)
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    subprocess.run(pre + [f"{pgbin}/initdb", "-D", data, "-A", "trust", "-U", user, "-E", "UTF8"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(pre + [f"{pgbin}/pg_ctl", "-D", data, "-l", os.path.join(work, "pg.log"), "-w", "-o",
                          f"-p {port} -k /tmp -c listen_addresses=127.0.0.1", "start"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(pre + [f"{pgbin}/psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(port), "-U", user, "-d", "postgres",
                          "-c", "CREATE DATABASE crashloop"], check=True)

    def stop():
        subprocess.run(pre + [f"{pgbin}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"], capture_output=True)
    return f"postgres://{user}@127.0.0.1:{port}/crashloop", stop


async def fleet_load(servers: list, attempts, next_n: list[int], delay: float, failures: list[str],
                     rng: random.Random):
    """The load of one FLEET trial; returns (acked, sent, victim index, takeover ms per attempt
    of the victim)."""
    acked: dict[str, list[int]] = {a: [] for a, _ in attempts}
    sent = 0
    victim = rng.randrange(2)
    killed_at: list[float] = []
    takeover: dict[str, float] = {}
    stop_at: list[float] = []

    async def client(i: int):
        nonlocal sent
        k = i
        conns: dict[int, Conn] = {}
        try:
            while not stop_at or time.monotonic() < stop_at[0]:
                j = k % len(attempts)
                attempt_id, token = attempts[j]
                k += CONNS
                home = j % 2
                target = home if not (killed_at and home == victim) else 1 - home
                try:
                    if target not in conns:
                        conns[target] = await Conn.open(servers[target].addr)
                    n = next_n[0]
                    next_n[0] += 1
                    sent += 1
                    status, body = await conns[target].request("POST", f"/~{token}/api/counter", {"n": n})
                except (OSError, asyncio.IncompleteReadError, ConnectionError):
                    conns.pop(target, None)
                    if target == victim and not killed_at:
                        await asyncio.sleep(0.001)
                    continue
                if status != 200 or b'"previous"' not in body:
                    failures.append(f"call {n} answered {status}: {body[:300]!r}")
                    return
                acked[attempt_id].append(n)
                if killed_at and home == victim and attempt_id not in takeover:
                    takeover[attempt_id] = (time.monotonic() - killed_at[0]) * 1000
        finally:
            for c in conns.values():
                c.close()

    def kill():
        os.kill(servers[victim].proc.pid, signal.SIGKILL)
        killed_at.append(time.monotonic())
        stop_at.append(killed_at[0] + SURVIVE_S)

    loop = asyncio.get_running_loop()
    loop.call_later(delay, kill)
    await asyncio.gather(*(client(i) for i in range(CONNS)))
    servers[victim].kill()
    victims = {a for j, (a, _) in enumerate(attempts) if j % 2 == victim}
    missing = victims - set(takeover)
    for a in missing:
        failures.append(f"attempt {a} of the killed process was not served by the survivor within {SURVIVE_S} s")
    return acked, sent, victim, takeover


def fleet_main() -> int:
    if BUILD:
        log("nice cargo build --release")
        subprocess.run(["nice", "cargo", "build", "--release"], cwd=ROOT, check=True, stdout=sys.stderr)
    work = tempfile.mkdtemp(prefix="understudy-crashloop-fleet.", dir=os.environ.get("TMPDIR"))
    os.chmod(work, 0o755)
    url, stop_pg = start_postgres(work)
    proj = os.path.join(work, "project")
    os.makedirs(os.path.join(proj, "mocks", "api"))
    with open(os.path.join(proj, "mocks", "api", "bump.json"), "w") as f:
        json.dump(COUNTER_OP, f)
    config = os.path.join(proj, "understudy.json")
    with open(config, "w") as f:
        json.dump({"data_dir": "data", "store": url, "integrations": {
            "api": {"profile": "rest", "operations": "mocks/api"}}}, f)
    stderr_path = os.path.join(work, "server.log")
    rng = random.Random(SEED)
    started = time.monotonic()
    tally = new_tally()
    every: dict[str, list[int]] = {}
    previous: dict[str, list[int]] = {}
    delays, calls, takeovers = [], [], []
    next_n = [0]
    servers = [None, None]
    ok_run = True
    try:
        for trial in range(TRIALS):
            for i in range(2):
                if servers[i] is None or servers[i].proc.poll() is not None:
                    servers[i] = Server(config, stderr_path)
            asyncio.run(read_back(servers[trial % 2].addr, previous, tally))
            attempts = asyncio.run(create_attempts(servers[0].addr, ATTEMPTS))
            delay = rng.uniform(KILL_MIN_S, KILL_MAX_S)
            acked, sent, victim, takeover = asyncio.run(
                fleet_load(servers, attempts, next_n, delay, tally["errors"], rng))
            servers[victim] = None
            delays.append(delay)
            calls.append(sent)
            takeovers.append(max(takeover.values(), default=0.0))
            previous = acked
            every.update(acked)
            log(f"trial {trial + 1}/{TRIALS}: process {victim} killed -9 after {delay * 1000:.0f} ms, "
                f"{sum(len(v) for v in acked.values())} acknowledged of {sent} sent, "
                f"survivor served its attempts within {takeovers[-1]:.0f} ms")
        for s in servers:
            if s is not None:
                s.kill()
        final_server = Server(config, stderr_path)
        asyncio.run(read_back(final_server.addr, previous, tally))
        final = new_tally()
        asyncio.run(read_back(final_server.addr, every, final))
        tally["final_recheck"] = {k: final[k] for k in ("attempts", "attempts_read_back", "acknowledged", "present")}
        tally["errors"] += final["errors"]
        tally["stop_exit"] = final_server.stop()
    except RuntimeError as e:
        tally["errors"].append(str(e))
        ok_run = False
    finally:
        for s in servers:
            if s is not None and s.proc.poll() is None:
                s.kill()
        stop_pg()
        if not KEEP:
            shutil.rmtree(work, ignore_errors=True)
    lost = tally["acknowledged"] - tally["present"]
    unreadable = tally["attempts"] - tally["attempts_read_back"]
    worst = max(takeovers, default=0.0)
    ok = ok_run and lost == 0 and unreadable == 0 and not tally["errors"] and worst < 1000
    print(json.dumps({
        "bench": "crashloop-fleet",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "trials": len(delays), "processes": 2, "connections": CONNS, "attempts_per_trial": ATTEMPTS,
        "seed": SEED, "acknowledged": tally["acknowledged"], "present": tally["present"], "lost": lost,
        "unacknowledged_present": tally["unacknowledged_present"],
        "attempts": tally["attempts"], "attempts_read_back": tally["attempts_read_back"],
        "final_recheck": tally.get("final_recheck"),
        "takeover_ms": {"max": round(worst), "median": round(statistics.median(takeovers)) if takeovers else 0},
        "kill_after_ms": {"min": round(min(delays, default=0) * 1000), "max": round(max(delays, default=0) * 1000)},
        "calls_sent_per_trial": {"min": min(calls, default=0), "median": statistics.median(calls) if calls else 0,
                                 "max": max(calls, default=0)},
        "stop_exit": tally.get("stop_exit"), "wall_s": round(time.monotonic() - started, 1),
        "errors": tally["errors"][:10], "ok": ok,
    }))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
