# Copied from the peer harness (bench/peers/parse_gen.py, 2026-11-29) so understudy is
# measured the same way; nothing outside the repository is read at run time.
"""Normalize wrk (RESULT line from wrk_report.lua) or oha (--output-format json) output from stdin
into one JSON object: requests, rps, p50_us, p90_us, p99_us, p999_us, max_us, errors, detail."""
import json, sys
gen = sys.argv[1]
text = sys.stdin.read()
if gen == "wrk":
    line = next((l for l in text.splitlines() if l.startswith("RESULT ")), None)
    if not line: sys.exit(1)
    w = json.loads(line[7:])
    out = {"requests": w["requests"], "rps": round(w["rps"], 1),
           "p50_us": w["p50_us"], "p90_us": w["p90_us"], "p99_us": w["p99_us"], "p999_us": w["p999_us"],
           "max_us": w["max_us"],
           "errors": w["err_connect"] + w["err_read"] + w["err_write"] + w["err_status"] + w["err_timeout"],
           "detail": {k: v for k, v in w.items() if k.startswith("err_")}}
else:
    try: d = json.loads(text[text.index("{"):])
    except Exception: sys.exit(1)
    s, lp = d["summary"], d["latencyPercentiles"]
    codes = {k: v for k, v in (d.get("statusCodeDistribution") or {}).items()}
    errs = {k: v for k, v in (d.get("errorDistribution") or {}).items() if "deadline" not in k}
    ok = codes.get("200", 0)
    us = lambda x: int(round((x or 0) * 1e6))
    out = {"requests": sum(codes.values()), "rps": round(ok / s["total"], 1) if s["total"] else 0,
           "p50_us": us(lp.get("p50")), "p90_us": us(lp.get("p90")), "p99_us": us(lp.get("p99")),
           "p999_us": us(lp.get("p99.9")), "max_us": us(s.get("slowest")),
           "errors": sum(errs.values()) + sum(v for k, v in codes.items() if k != "200"),
           "detail": {"codes": codes, "errors": errs}}
print(json.dumps(out, separators=(",", ":")))
