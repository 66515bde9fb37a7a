-- bench/fleet.sh: spread the requests over the attempts whose tokens are in $WRK_TOKENS
-- (space-separated), round robin: calls of different attempts run concurrently.
local tokens = {}
for t in string.gmatch(os.getenv("WRK_TOKENS") or "", "%S+") do tokens[#tokens + 1] = t end
local i = 0
request = function()
  i = i % #tokens + 1
  return wrk.format("GET", nil, { ["Understudy-Attempt"] = tokens[i] })
end
