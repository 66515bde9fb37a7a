#!/usr/bin/env python3
"""bench/run.sh's last step: turn the raw facts (META jsonl: {"key","value"}) and runs (RUNS
jsonl: one wrk/oha run each, see bench_run in run.sh) into the ONE JSON document the harness
prints. Field meanings: bench/README.md.

    python3 bench/report.py META.jsonl RUNS.jsonl
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def ms(us):
    return None if us is None else round(us / 1000.0, 3)


def run_row(r):
    res = r.get("r") or {}
    hz = r["clk_tck"]
    req = res.get("requests") or 0
    try:
        u, s = (float(x) for x in r.get("gen_cpu", "").split()[:2])
        gen_s = u + s
    except ValueError:
        gen_s = None
    foreign = None
    if gen_s is not None:
        foreign = max(0.0, (r["busy_ticks"] / hz - r["server_cpu_ticks"] / hz - gen_s) / r["dur_s"])
    row = {
        "target": r["target"], "workload": r["workload"], "conc": r["conc"], "gen": r["gen"],
        "dur_s": r["dur_s"], "loadavg_before": r["loadavg_before"],
        "rps": res.get("rps"), "requests": req,
        "p50_ms": ms(res.get("p50_us")), "p90_ms": ms(res.get("p90_us")),
        "p99_ms": ms(res.get("p99_us")), "p999_ms": ms(res.get("p999_us")),
        "max_ms": ms(res.get("max_us")),
        "errors": res.get("errors"), "error_detail": res.get("detail"),
        "server_cpu_us_per_req": round(r["server_cpu_ticks"] / hz * 1e6 / req, 1) if req else None,
        "server_cores": round(r["server_cpu_ticks"] / hz / r["dur_s"], 2),
        "gen_cpu_s": round(gen_s, 2) if gen_s is not None else None,
        "foreign_cores": round(foreign, 2) if foreign is not None else None,
        "server_rss_kb": (r.get("mem") or {}).get("rss_kb"),
        "server_peak_rss_kb": (r.get("mem") or {}).get("hwm_kb"),
    }
    f0, f1 = r.get("flushes_before"), r.get("flushes_after")
    if f0 is not None and f1 is not None:
        # the metric is read over HTTP before and after the run: those 2 reads are not flushed
        row["store_flushes"] = f1 - f0
        row["calls_per_flush"] = round(req / (f1 - f0), 2) if f1 > f0 else None
    if not res:
        row["error"] = "the generator produced no result (see the raw output in the work dir)"
    return row


def ratio(a, b, nd=3):
    return round(a / b, nd) if a is not None and b else None


def diff(a, b, nd=3):
    return round(a - b, nd) if a is not None and b is not None else None


MIB = 1024.0


def target(tid, what, figure, threshold, met, detail=None):
    """One line of `targets`: issue 20's target `tid`, the figure measured in this sitting,
    the threshold, and met (true/false; null when the figure is missing)."""
    t = {"target": tid, "what": what, "figure": figure, "threshold": threshold,
         "met": None if figure is None or met is None else bool(met)}
    if detail:
        t["detail"] = detail
    return t


def unavailable(v):
    return v if isinstance(v, str) else None


def targets(runs, find, meta, doc):
    """Issue 20's targets (1-5), each as a ratio or figure with its threshold and verdict.
    "c=64" is the highest concurrency of the run (SMOKE: 4), named in `what`."""
    concs = sorted({x["conc"] for x in runs if x["target"] == "understudy" and x["gen"] == "wrk"})
    hi = concs[-1] if concs else None
    out = []
    u, n = find("understudy", "A", hi, "wrk"), find("nginx", "A", hi, "wrk")
    r_rps = ratio(u and u["rps"], n and n["rps"])
    r_p99 = ratio(u and u["p99_ms"], n and n["p99_ms"], 2)
    why = None if n else (meta.get("nginx") or "no nginx run")
    out.append(target("1", f"replay c={hi} rps ÷ nginx rps (evidence on, durable)", r_rps, "≥ 0.75",
                      r_rps is not None and r_rps >= 0.75, why))
    out.append(target("1", f"replay c={hi} p99 ÷ nginx p99", r_p99, "≤ 2",
                      r_p99 is not None and r_p99 <= 2, why))
    for c in concs:
        st, rp = find("understudy", "state", c, "wrk"), find("understudy", "A", c, "wrk")
        r = ratio(st and st["rps"], rp and rp["rps"])
        out.append(target("2", f"state workload c={c} rps ÷ replay c={c} rps", r, "≥ 0.90",
                          r is not None and r >= 0.90,
                          unavailable(meta.get("state")) or f"state after the load: {meta.get('state_after_load')}"))
    g = doc["startup"]["generated"]
    ops = g.get("ops")
    for phase in ("cold", "warm"):
        v = g.get(phase)
        ms_ = v.get("ready_ms") if isinstance(v, dict) else None
        out.append(target("3", f"start-up with {ops} operation files, {phase} (ms)", ms_, "< 1000",
                          ms_ is not None and ms_ < 1000, unavailable(v)))
    for phase in ("cold", "warm"):
        v = g.get(phase)
        rss = round(v["rss_kb"] / MIB, 1) if isinstance(v, dict) and v.get("rss_kb") else None
        out.append(target("3", f"RSS after start-up with {ops} files, {phase} (MiB)", rss, "< 100",
                          rss is not None and rss < 100, unavailable(v)))
    a = g.get("attempt_create") or {}
    out.append(target("3", f"POST /_understudy/api/attempts p50 with {ops} operations, one keep-alive connection (ms)",
                      a.get("p50_ms"), "≤ 1", a.get("p50_ms") is not None and a["p50_ms"] <= 1,
                      a.get("error") or (a.get("one") and f"one answer: {a['one'].get('bytes')} bytes")))
    rl = g.get("reload") or {}
    fr = rl.get("files_read")
    out.append(target("3", f"hot reload of 1 changed file among {ops}: files read (time, CPU, RSS growth in detail)",
                      fr, "= 1 (no per-file work for the others)", fr == 1 if fr is not None else None,
                      rl.get("error") or (f"{rl.get('reload_ms')} ms to the log line, {rl.get('served_ms', '–')} ms to the first answer "
                                          f"with the new content (served: {rl.get('served')}), server CPU {rl.get('server_cpu_ms')} ms, "
                                          f"RSS growth {round((rl.get('rss_growth_kb') or 0) / MIB, 1)} MiB, revisions saved "
                                          f"{rl.get('revisions_saved')}" + ("" if fr is not None else "; this build's log line has no files_read")
                                          if rl else None)))
    d = doc["durability_attempt"]
    dr = d.get("replay_c1") if isinstance(d, dict) else None
    n1 = find("nginx", "A", 1, "wrk")
    added = diff(dr and dr["p50_ms"], n1 and n1["p50_ms"])
    out.append(target("4", "durability attempt: replay c=1 p50 − nginx c=1 p50 (ms)", added, "≤ 0.05",
                      added is not None and added <= 0.05, unavailable(d)))
    fw = None
    if isinstance(d, dict) and isinstance(d.get("dry_run"), dict):
        fw = next((x["added_p50_ms"] for x in d["dry_run"]["rows"] if x["conc"] == 1 and x["gen"] == "wrk"), None)
    out.append(target("4", "durability attempt: dry-run forwarding added p50, c=1 (ms)", fw, "≤ 0.1",
                      fw is not None and fw <= 0.1,
                      unavailable(d) or (unavailable(d.get("dry_run")) if isinstance(d, dict) else None)))
    # the default durability ("call"), for reference (not a target of its own)
    u1 = find("understudy", "A", 1, "wrk")
    ref = diff(u1 and u1["p50_ms"], n1 and n1["p50_ms"])
    out.append(target("4 (ref.)", "default durability call: replay c=1 p50 − nginx c=1 p50 (ms)", ref, "–", None))
    dd = doc["dry_run_forwarding"]
    fw0 = next((x["added_p50_ms"] for x in dd["rows"] if x["conc"] == 1 and x["gen"] == "wrk"), None) \
        if isinstance(dd, dict) else None
    out.append(target("4 (ref.)", "default durability call: dry-run forwarding added p50, c=1 (ms)", fw0, "–", None))
    e = doc["engine"]
    ev = [b for b in e.get("benches", []) if b["bench"].startswith("evaluate")] if isinstance(e, dict) else []
    worst = max((b["mean_ns"] for b in ev), default=None)
    out.append(target("5", "engine evaluation, slowest `evaluate` bench, criterion mean (µs)",
                      round(worst / 1000, 3) if worst is not None else None, "≤ 5",
                      worst is not None and worst <= 5000,
                      unavailable(e) or "; ".join(f"{b['bench']}: mean {round(b['mean_ns'] / 1000, 3)} µs, "
                                                  f"median {round(b['median_ns'] / 1000, 3)} µs" for b in ev)))
    rr = doc["rss_after_load"]
    rss = round(rr["after"]["rss_kb"] / MIB, 1) if isinstance(rr.get("after"), dict) else None
    out.append(target("5", f"RSS after {rr.get('dur_s')} s of replay at c={rr.get('conc')} (MiB)", rss, "< 50",
                      rss is not None and rss < 50, unavailable(rr.get("after"))))
    return out


def main():
    meta = {m["key"]: m["value"] for m in load(sys.argv[1])}
    runs = [run_row(r) for r in load(sys.argv[2])]

    def find(target, wl, conc, gen):
        return next((x for x in runs if (x["target"], x["workload"], x["conc"], x["gen"]) == (target, wl, conc, gen)), None)

    # understudy vs nginx, workload A, same generator and concurrency, same sitting
    ratios = []
    for u in (x for x in runs if x["target"] == "understudy" and x["workload"] == "A"):
        n = find("nginx", "A", u["conc"], u["gen"])
        if n:
            ratios.append({
                "gen": u["gen"], "conc": u["conc"],
                "ratio_rps_vs_nginx": ratio(u["rps"], n["rps"]),
                "ratio_p99_vs_nginx": ratio(u["p99_ms"], n["p99_ms"], 2),
                "ratio_p50_vs_nginx": ratio(u["p50_ms"], n["p50_ms"], 2),
                "understudy_rps": u["rps"], "nginx_rps": n["rps"],
                "understudy_p99_ms": u["p99_ms"], "nginx_p99_ms": n["p99_ms"],
            })

    # dry-run forwarding: added p50 = proxied p50 - direct (nginx) p50, same gen and conc
    def dry_rows(target):
        rows = []
        for d in (x for x in runs if x["target"] == target):
            n = find("nginx", "A", d["conc"], d["gen"])
            rows.append({"gen": d["gen"], "conc": d["conc"], "proxied_p50_ms": d["p50_ms"],
                         "direct_p50_ms": n and n["p50_ms"],
                         "added_p50_ms": round(d["p50_ms"] - n["p50_ms"], 3) if n and d["p50_ms"] is not None else None,
                         "proxied_rps": d["rps"], "direct_rps": n and n["rps"],
                         "proxied_p99_ms": d["p99_ms"]})
        return rows

    dry = meta.get("dry_run")
    if dry is None:
        rows = dry_rows("understudy-dry-run")
        dry = {"check": meta.get("dry_run_check"), "rows": rows, "mem": meta.get("dry_run_mem")}

    def startup(phase):
        v = meta.get(f"startup_{phase}")
        if isinstance(v, dict):
            m = v.get("mem_after_start") or {}
            return {"ready_ms": v["ready_ms"], "rss_kb": m.get("rss_kb"), "peak_rss_kb": m.get("hwm_kb"),
                    "probe_status": v.get("probe_status")}
        return v

    # opt-in durability "attempt": replay c=1 and dry-run c=1, or why not
    durable = meta.get("durability")
    if durable is None:
        dd = meta.get("dry_run_durable")
        if dd is None:
            dd = {"check": meta.get("dry_run_durable_check"), "rows": dry_rows("understudy-dry-run-durability-attempt"),
                  "mem": meta.get("dry_run_durable_mem")}
        durable = {"config": {"durability": "attempt"}, "check": meta.get("durability_check"),
                   "replay_c1": find("understudy-durability-attempt", "A", 1, "wrk"), "dry_run": dd}

    rss_run = next((x for x in runs if x["target"] == "understudy-rss"), None)
    after = meta.get("rss_load_after")
    rss_after_load = {"dur_s": rss_run and rss_run["dur_s"], "conc": rss_run and rss_run["conc"],
                      "before": meta.get("rss_load_before"), "after": after, "run": rss_run}

    att = next((x for x in runs if x["target"] == "understudy-attempts"), None)
    attempt_create = {"one": meta.get("attempt_one")}
    if att:
        attempt_create.update({k: att[k] for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms", "rps", "requests", "errors", "dur_s")})
    elif meta.get("startup_warm") is not None:
        attempt_create["error"] = "unavailable: no attempt-creation run (see the warm start-up)"

    us = meta.get("understudy_startup") or {}
    doc = {
        "harness": "understudy bench/run.sh",
        "date": meta.get("date"),
        "command": meta.get("command"),
        "machine": meta.get("machine"),
        "loadavg_end": meta.get("loadavg_end"),
        "params": meta.get("params"),
        "versions": meta.get("versions"),
        "wire": {
            "workload_A": "GET /crm/services/data/v60.0/sobjects/Contact/003000000000001; understudy's mock data = the peers' whole body.json, nginx serves body.json",
            "state": "POST /crm/services/data/v60.0/sobjects/Counter__c {\"Name\":\"c1\",\"By\":\"w<n>\"}, n = 1, 2, ... per request (rule + $state read + set_state that changes the state on every call)",
        },
        "checks": {
            "nginx": meta.get("check_nginx", meta.get("nginx")),
            "understudy_A": meta.get("check_understudy_A"),
            "understudy_state": meta.get("check_understudy_state", meta.get("state")),
            "state_after_load": meta.get("state_after_load"),
        },
        "evidence": {
            "recording": "on, durable (server default: every call is written and group-flushed before it is answered)",
            "check": meta.get("evidence_check"),
            "main_data_dir_kb_after_load": meta.get("understudy_data_dir_kb"),
        },
        "runs": runs,
        "ratios_vs_nginx": ratios if ratios else (meta.get("nginx") or "unavailable: no nginx runs"),
        "dry_run_forwarding": dry,
        "memory_kb": {
            "understudy_after_start": us.get("mem_after_start"),
            "understudy_idle_before_load": meta.get("understudy_mem_idle"),
            "understudy_after_A": meta.get("understudy_mem_after_A"),
            "understudy_after_state": meta.get("understudy_mem_after_state"),
            "nginx_after_A": meta.get("nginx_mem"),
        },
        "startup": {
            "bench_project": {"ops": 2, "ready_ms": us.get("ready_ms"),
                               "rss_kb": (us.get("mem_after_start") or {}).get("rss_kb")},
            "generated": {
                "ops": (meta.get("ops_files") or {}).get("count"),
                "files_kb": (meta.get("ops_files") or {}).get("kb"),
                "cold": startup("cold"),
                "warm": startup("warm"),
                "data_dir_kb": meta.get("ops_data_dir_kb"),
                "reload": meta.get("reload"),
                "attempt_create": attempt_create,
            },
        },
        "durability_attempt": durable,
        "rss_after_load": rss_after_load,
        "engine": meta.get("engine"),
        "understudy_shutdown_ms": meta.get("understudy_shutdown_ms"),
        "work_dir": meta.get("work_dir"),
    }
    doc["targets"] = targets(runs, find, meta, doc)
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
