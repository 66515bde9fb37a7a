-- Copied from the peer harness (bench/peers/wrk_report.lua, 2026-11-29) so understudy is
-- measured the same way; nothing outside the repository is read at run time.
-- wrk done() hook: print one machine-readable line. Latencies in microseconds.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests":%d,"duration_us":%d,"rps":%.1f,"bytes":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d,"mean_us":%.1f,' ..
    '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6), summary.bytes,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean,
    e.connect, e.read, e.write, e.status, e.timeout))
end
