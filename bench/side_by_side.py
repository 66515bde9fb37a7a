"""Markdown table of one sitting: the peers' results.jsonl (one pass) beside understudy's
bench/run.sh JSON, with understudy's ratios. Usage: side_by_side.py PEERS_JSONL US_JSON PASS"""
import json
import sys

peers_file, us_file, pass_name = sys.argv[1:4]
rows = [json.loads(line) for line in open(peers_file)]
rows = [r for r in rows if r["pass"] == pass_name and r["gen"] == "wrk"]
us = json.load(open(us_file))

# (workload, target, conc) -> {rps, p50, p99, p999 (ms), cpu (us/req)}
T = {}
for r in rows:
    x = r["r"]
    n = x["requests"] or 1
    T[(r["workload"], r["peer"], r["conc"])] = dict(
        rps=x["rps"], p50=x["p50_us"] / 1000, p99=x["p99_us"] / 1000, p999=x["p999_us"] / 1000,
        cpu=r["server_cpu_ticks"] / r["clk_tck"] * 1e6 / n, foreign=r["foreign_cores"])
for r in us["runs"]:
    if r["gen"] != "wrk":
        continue
    name = {"nginx": "nginx (understudy's run)", "understudy": "understudy"}.get(r["target"], r["target"])
    if r["target"] == "understudy" and r["workload"] == "state":
        name = "understudy (state: rule + $state + set_state)"
    wl = "B" if r["workload"] == "B" else "A"
    T[(wl, name, r["conc"])] = dict(rps=r["rps"], p50=r["p50_ms"], p99=r["p99_ms"], p999=r["p999_ms"],
                                    cpu=r["server_cpu_us_per_req"] or 0, foreign=r["foreign_cores"])

def f(v, d=2):
    return "–" if v is None else (f"{v:,.0f}".replace(",", " ") if d == 0 else f"{v:.{d}f}")

print(f"## Side by side — {us['date']}, pass `{pass_name}`, {us['machine'].get('nproc')} cores, "
      f"{us['machine'].get('cpu', '')}\n")
print(f"Generator `wrk -t1`, {us['params'].get('dur_s', us['params'].get('DUR', '?'))} s per run. "
      "understudy records durable evidence for every call; the peers' journals are in memory.\n")
us_a = {c: T.get(("A", "understudy", c)) for c in (1, 64)}
print("### Workload A — a stubbed 604-byte Salesforce-shaped GET\n")
print("| target | c=1 rps | c=1 p50 / p99 ms | c=64 rps | c=64 p50 / p99 / p99.9 ms | CPU µs/req (c=64) | understudy ÷ target, c=64 rps | understudy p99 ÷ target p99, c=64 | foreign cores (c=64) |")
print("|---|---|---|---|---|---|---|---|---|")
targets = []
for (wl, name, c) in T:
    if wl == "A" and name not in targets:
        targets.append(name)
for name in targets:
    a, b = T.get(("A", name, 1)), T.get(("A", name, 64))
    ratio = f(us_a[64]["rps"] / b["rps"], 2) if b and us_a[64] else "–"
    pr = f(us_a[64]["p99"] / b["p99"], 1) if b and us_a[64] and b["p99"] else "–"
    print(f"| {name} | {f(a and a['rps'], 0)} | {f(a and a['p50'])} / {f(a and a['p99'])} | "
          f"{f(b and b['rps'], 0)} | {f(b and b['p50'])} / {f(b and b['p99'])} / {f(b and b['p999'])} | "
          f"{f(b and b['cpu'], 0)} | {ratio} | {pr} | {f(b and b['foreign'])} |")

print("\n### Workload B — a GET forwarded to nginx (dry-run for understudy)\n")
print("| proxy | c=1 p50 ms | added p50 over nginx direct (c=1), ms | c=64 rps | c=64 p99 ms |")
print("|---|---|---|---|---|")
direct = T.get(("A", "nginx", 1)) or T.get(("A", "nginx (understudy's run)", 1))
direct_us = T.get(("A", "nginx (understudy's run)", 1))
for (wl, name, c) in sorted(T):
    if wl != "B" or c != 1:
        continue
    base = direct_us if name.startswith("understudy") else direct
    b64 = T.get(("B", name, 64))
    print(f"| {name} | {f(T[(wl, name, c)]['p50'], 3)} | {f(T[(wl, name, c)]['p50'] - base['p50'], 3) if base else '–'} | "
          f"{f(b64 and b64['rps'], 0)} | {f(b64 and b64['p99'])} |")
r = us.get("ratios_vs_nginx")
if r:
    print("\nunderstudy ÷ nginx (same run.sh run): " + "; ".join(
        f"c={x['conc']}: rps {x['ratio_rps_vs_nginx']}, p99 {x['ratio_p99_vs_nginx']}x" for x in r))
m = us.get("memory_kb")
if m:
    print(f"\nunderstudy memory: {json.dumps(m)}")
s = us.get("startup", {}).get("generated")
if s:
    print(f"\nstart-up with {s['ops']} operation files: cold {s['cold'].get('ready_ms')} ms / "
          f"{s['cold'].get('rss_kb', 0) // 1024} MiB, warm {s['warm'].get('ready_ms')} ms / "
          f"{s['warm'].get('rss_kb', 0) // 1024} MiB")
