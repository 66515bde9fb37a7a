-- bench/run.sh's attempt-creation measurement: `POST /_understudy/api/attempts {}` on every
-- request (wrk -c1: many requests on one keep-alive connection). Concatenated with
-- wrk_report.lua.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = "{}"
