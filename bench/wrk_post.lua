-- Request setup for bench/run.sh's state workload (bump_counter): a POST with a JSON body
-- whose `By` changes on every request ("w1", "w2", ...), so that every call's `set_state`
-- really changes the state and commits it (a set_state that changes nothing writes nothing).
-- One counter per wrk thread (run.sh uses -t1). run.sh concatenates this file with
-- wrk_report.lua (wrk takes one script).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, '{"Name":"c1","By":"w' .. n .. '"}')
end
