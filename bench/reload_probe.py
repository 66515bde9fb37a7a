#!/usr/bin/env python3
"""bench/run.sh's hot-reload measurement on a running server of a bench/gen_ops.py project:
rewrite ONE operation file among all of them and time it until the server logs its
`hot reload: operation files changed` line. Prints one JSON object.

    python3 bench/reload_probe.py PID STDERR_LOG PROJECT_DIR BASE_URL [TIMEOUT_S]

Fields: `reload_ms` (wall time from the start of the rewrite to the log line, the log polled
every millisecond), `files_read` (from that line: how many files the reload loaded, checked
and compiled; null when the build's line does not say), `revisions_saved` (entries of the
line's `revisions=[…]`), `server_cpu_ms` (utime+stime of the server from the rewrite to the
line), `rss_before_kb`, `rss_after_kb` (at the line), `rss_growth_kb`, `hwm_growth_kb`
(VmHWM), `served` (a GET of the rewritten operation answers with the new content, polled
every 2 ms after the line for up to 5 s) and `served_ms` (rewrite → that answer), or `error`.
"""
import json
import os
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_ops  # noqa: E402

DONE = "hot reload: operation files changed"
REFUSED = "hot reload refused"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


def lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return [ANSI.sub("", line) for line in f]


def main():
    pid, log, project, base = sys.argv[1:5]
    timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 60
    hz = os.sysconf("SC_CLK_TCK")
    seen = len(lines(log))
    tag = f" (reloaded {int(time.time())})"
    rss0, hwm0, cpu0 = status(pid, "VmRSS"), status(pid, "VmHWM"), cpu_ticks(pid)
    t0 = time.perf_counter()
    gen_ops.rewrite(project, 1, tag)
    found = None
    while time.perf_counter() - t0 < timeout:
        new = lines(log)[seen:]
        found = next((l for l in new if DONE in l or REFUSED in l), None)
        if found:
            break
        time.sleep(0.001)
    t1 = time.perf_counter()
    out = {"rss_before_kb": rss0}
    if not found:
        out["error"] = f"no `{DONE}` line within {timeout:.0f} s"
    elif REFUSED in found:
        out["error"] = "the reload was refused: " + "".join(lines(log)[seen:])[-400:]
    else:
        cpu1 = cpu_ticks(pid)
        m = re.search(r"files_read\s*[=:]\s*(\d+)", found)
        revs = re.search(r"revisions\s*[=:]\s*\[(.*?)\]", found)
        out.update({
            "reload_ms": round((t1 - t0) * 1000, 1),
            "files_read": int(m.group(1)) if m else None,
            "revisions_saved": revs.group(1).count("(") if revs else None,
            "server_cpu_ms": round((cpu1 - cpu0) * 1000 / hz, 1),
            "rss_after_kb": status(pid, "VmRSS"),
            "log_line": found.strip()[:300],
        })
        out["rss_growth_kb"] = out["rss_after_kb"] - rss0
        out["hwm_growth_kb"] = status(pid, "VmHWM") - hwm0
        url = base + "/crm/services/data/v60.0/sobjects/Bench00001__c/a0B000000000001"
        out["served"] = False
        try:
            while time.perf_counter() - t1 < 5:
                if tag in urllib.request.urlopen(url, timeout=10).read().decode():
                    out["served"] = True
                    out["served_ms"] = round((time.perf_counter() - t0) * 1000, 1)
                    break
                time.sleep(0.002)
        except Exception as e:  # the measurement stands; say why the probe failed
            out["served"] = f"probe failed: {type(e).__name__}: {e}"[:200]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
