#!/usr/bin/env python3
"""The `targets` of a bench/run.sh JSON document (issue 20's targets, see bench/report.py) as a
Markdown table: target, figure, threshold, met / not met. bench/run.sh prints it on stderr at
the end; bench/side_by_side.py adds the peer-relative targets and prints it too.

    python3 bench/targets.py RUN_SH_JSON
"""
import json
import sys


def verdict(met):
    return "–" if met is None else ("**met**" if met else "**not met**")


def markdown(targets):
    lines = ["| # | target | figure | threshold | verdict | detail |", "|---|---|---|---|---|---|"]
    for t in targets:
        fig = "–" if t["figure"] is None else t["figure"]
        detail = str(t.get("detail") or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {t['target']} | {t['what']} | {fig} | {t['threshold']} | {verdict(t['met'])} | {detail} |")
    return "\n".join(lines)


if __name__ == "__main__":
    doc = json.load(open(sys.argv[1]))
    print(markdown(doc.get("targets") or []))
