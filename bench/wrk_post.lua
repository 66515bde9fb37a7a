-- Request setup for bench/run.sh's state workload (bump_counter): a POST with a JSON body.
-- run.sh concatenates this file with wrk_report.lua (wrk takes one script).
-- WRK_BODY overrides the body.
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY") or '{"Name":"c1","By":"bench"}'
wrk.headers["Content-Type"] = "application/json"
