"""Markdown tables of one sitting: the peers' results.jsonl (one pass) beside understudy's
bench/run.sh JSON, with understudy's ratios to every peer, and issue 20's targets (run.sh's
`targets` plus the peer-relative ones: understudy's rps and forwarding cost against every peer).
Usage: side_by_side.py PEERS_JSONL US_JSON PASS"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from targets import markdown  # noqa: E402

peers_file, us_file, pass_name = sys.argv[1:4]
rows = [json.loads(line) for line in open(peers_file) if line.strip()]
rows = [r for r in rows if r["pass"] == pass_name and r["gen"] == "wrk"]
us = json.load(open(us_file))

# understudy's rows of run.sh that belong in the side-by-side tables, and their names there
US_NAMES = {
    ("nginx", "A"): "nginx (understudy's run)",
    ("understudy", "A"): "understudy",
    ("understudy", "state"): "understudy (state: rule + $state + set_state)",
    ("understudy-durability-attempt", "A"): "understudy (durability attempt)",
    ("understudy-dry-run", "B"): "understudy-dry-run",
    ("understudy-dry-run-durability-attempt", "B"): "understudy-dry-run (durability attempt)",
}

# (workload, target, conc) -> {rps, p50, p99, p999 (ms), cpu (us/req)}
T = {}
peer_names = set()
for r in rows:
    x = r["r"]
    n = x["requests"] or 1
    T[(r["workload"], r["peer"], r["conc"])] = dict(
        rps=x["rps"], p50=x["p50_us"] / 1000, p99=x["p99_us"] / 1000, p999=x["p999_us"] / 1000,
        cpu=r["server_cpu_ticks"] / r["clk_tck"] * 1e6 / n, foreign=r["foreign_cores"])
    peer_names.add((r["workload"], r["peer"]))
for r in us["runs"]:
    name = US_NAMES.get((r["target"], r["workload"]))
    if r["gen"] != "wrk" or not name:
        continue
    wl = "B" if r["workload"] == "B" else "A"
    T[(wl, name, r["conc"])] = dict(rps=r["rps"], p50=r["p50_ms"], p99=r["p99_ms"], p999=r["p999_ms"],
                                    cpu=r["server_cpu_us_per_req"] or 0, foreign=r["foreign_cores"])


def f(v, d=2):
    return "–" if v is None else (f"{v:,.0f}".replace(",", " ") if d == 0 else f"{v:.{d}f}")


def div(a, b, d=2):
    return f(a / b, d) if a is not None and b else "–"


print(f"## Side by side — {us['date']}, pass `{pass_name}`, {us['machine'].get('nproc')} cores, "
      f"{us['machine'].get('cpu', '')}\n")
print(f"Generator `wrk -t1`, {us['params'].get('dur_s', '?')} s per run "
      f"({us['params'].get('xdur_s', '?')} s for the durability-attempt rows). "
      "understudy records durable evidence for every call (by default); the peers' journals are in memory.\n")
us64 = T.get(("A", "understudy", 64))
print("### Workload A — a stubbed 604-byte Salesforce-shaped GET\n")
print("| target | c=1 rps | c=1 p50 / p99 ms | c=64 rps | c=64 p50 / p99 / p99.9 ms | CPU µs/req (c=64) | understudy ÷ target, c=64 rps | understudy p99 ÷ target p99, c=64 | foreign cores (c=64) |")
print("|---|---|---|---|---|---|---|---|---|")
targets = []
for (wl, name, c) in T:
    if wl == "A" and name not in targets:
        targets.append(name)
for name in targets:
    a, b = T.get(("A", name, 1)), T.get(("A", name, 64))
    print(f"| {name} | {f(a and a['rps'], 0)} | {f(a and a['p50'])} / {f(a and a['p99'])} | "
          f"{f(b and b['rps'], 0)} | {f(b and b['p50'])} / {f(b and b['p99'])} / {f(b and b['p999'])} | "
          f"{f(b and b['cpu'], 0)} | {div(us64 and us64['rps'], b and b['rps'])} | "
          f"{div(us64 and us64['p99'], b and b['p99'], 1)} | {f(b and b['foreign'])} |")

print("\n### Workload B — a GET forwarded to nginx (dry-run for understudy)\n")
print("| proxy | c=1 p50 ms | added p50 over nginx direct (c=1), ms | c=64 rps | c=64 p99 ms |")
print("|---|---|---|---|---|")
direct_peers = T.get(("A", "nginx", 1)) or T.get(("A", "nginx (understudy's run)", 1))
direct_us = T.get(("A", "nginx (understudy's run)", 1))
added = {}  # proxy -> added p50 at c=1 (ms)
for (wl, name, c) in sorted(T):
    if wl != "B" or c != 1:
        continue
    base = direct_us if name.startswith("understudy") else direct_peers
    p50 = T[(wl, name, c)]["p50"]
    if base and p50 is not None:
        added[name] = p50 - base["p50"]
    b64 = T.get(("B", name, 64))
    print(f"| {name} | {f(p50, 3)} | {f(added.get(name), 3)} | {f(b64 and b64['rps'], 0)} | {f(b64 and b64['p99'])} |")

r = us.get("ratios_vs_nginx")
if isinstance(r, list) and r:
    print("\nunderstudy ÷ nginx (same run.sh run): " + "; ".join(
        f"c={x['conc']}: rps {x['ratio_rps_vs_nginx']}, p99 {x['ratio_p99_vs_nginx']}x" for x in r))
m = us.get("memory_kb")
if m:
    print(f"\nunderstudy memory: {json.dumps(m)}")

# ---- targets: run.sh's, then the peer-relative ones --------------------------------------
tg = list(us.get("targets") or [])
peers_a = [n for (wl, n) in peer_names if wl == "A" and n != "nginx"]
fastest = max(peers_a, key=lambda n: (T.get(("A", n, 64)) or {}).get("rps") or 0, default=None)
fb = T.get(("A", fastest, 64)) if fastest else None
rr = round(us64["rps"] / fb["rps"], 2) if us64 and fb and fb["rps"] else None
tg.append({"target": "1 (peers)", "what": f"replay c=64 rps ÷ the fastest peer's ({fastest})", "figure": rr,
           "threshold": "≈ 2 (the issue's \"≈ 2× every peer\")", "met": None})
peer_added = {n: v for n, v in added.items() if not n.startswith("understudy")}
best = min(peer_added, key=peer_added.get) if peer_added else None
for name, label in (("understudy-dry-run (durability attempt)", "durability attempt"),
                    ("understudy-dry-run", "default durability call, for reference")):
    mine = added.get(name)
    ok = None if mine is None or best is None else mine < peer_added[best]
    tg.append({"target": "4 (peers)", "what": f"dry-run added p50, c=1, {label}, vs the best peer's (ms)",
               "figure": None if mine is None else round(mine, 3),
               "threshold": f"< {peer_added[best]:.3f} ({best})" if best else "< every peer's (no peer rows)",
               "met": ok if name.endswith("(durability attempt)") else None,
               "detail": "; ".join(f"{n} {v:.3f}" for n, v in sorted(peer_added.items(), key=lambda kv: kv[1]))
               or None})

print("\n### Targets (issue 20), this sitting\n")
print(markdown(tg))
met = [t for t in tg if t["met"] is not None]
missed = [f"{t['target']} {t['what']}" for t in met if not t["met"]]
print(f"\n{len(met) - len(missed)} of {len(met)} verdicts met" + (f"; not met: {'; '.join(missed)}." if missed else "."))
