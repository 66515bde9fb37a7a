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
    dry = meta.get("dry_run")
    if dry is None:
        rows = []
        for d in (x for x in runs if x["target"] == "understudy-dry-run"):
            n = find("nginx", "A", d["conc"], d["gen"])
            rows.append({"gen": d["gen"], "conc": d["conc"], "proxied_p50_ms": d["p50_ms"],
                         "direct_p50_ms": n and n["p50_ms"],
                         "added_p50_ms": round(d["p50_ms"] - n["p50_ms"], 3) if n and d["p50_ms"] is not None else None,
                         "proxied_rps": d["rps"], "direct_rps": n and n["rps"],
                         "proxied_p99_ms": d["p99_ms"]})
        dry = {"check": meta.get("check_dry_run"), "rows": rows, "mem": meta.get("dry_run_mem")}

    def startup(phase):
        v = meta.get(f"startup_{phase}")
        if isinstance(v, dict):
            m = v.get("mem_after_start") or {}
            return {"ready_ms": v["ready_ms"], "rss_kb": m.get("rss_kb"), "peak_rss_kb": m.get("hwm_kb"),
                    "probe_status": v.get("probe_status")}
        return v

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
            "state": "POST /crm/services/data/v60.0/sobjects/Counter__c {\"Name\":\"c1\",\"By\":\"bench\"} (rule + $state read + set_state per call)",
        },
        "checks": {
            "nginx": meta.get("check_nginx", meta.get("nginx")),
            "understudy_A": meta.get("check_understudy_A"),
            "understudy_state": meta.get("check_understudy_state", meta.get("state")),
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
            },
        },
        "understudy_shutdown_ms": meta.get("understudy_shutdown_ms"),
        "work_dir": meta.get("work_dir"),
    }
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
