-- wrk: one MCP `tools/call` per request, stateless (no session), for bench/gateway.sh.
--   wrk ... -s call.lua URL -- TOOL MODE [VERSION]
-- TOOL is the demo bank's get_balance or transfer; MODE "new" makes every transfer distinct (an
-- amount no earlier run used), "same" makes them all identical (through undolog: replays).
-- A response counts as an error unless it is HTTP 200 with `"isError":false`; the first one is
-- printed to stderr. done() prints one JSON line.
local threads = {}
local next_id = 1
function setup(thread)
  thread:set("tid", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end
function init(args)
  tool = args[1]; mode = args[2]; version = args[3] or "2026-07-28"
  counter = 0; failed = 0
  -- Distinct across threads and across runs a second or more apart.
  base = tid * 1000000000000 + os.time() * 1000000
  headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["MCP-Protocol-Version"] = version,
    ["Mcp-Method"] = "tools/call",
    ["Mcp-Name"] = tool,
  }
  meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"' .. version ..
    '","io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}'
end
function request()
  counter = counter + 1
  local args
  if tool == "transfer" then
    local amount = 1
    if mode == "new" then amount = base + counter end
    args = string.format('{"from_account":"alice","to_account":"bob","amount":%d}', amount)
  else
    args = '{"account":"alice"}'
  end
  local body = string.format('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s,%s}}',
    counter, tool, args, meta)
  return wrk.format("POST", nil, headers, body)
end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"isError":false', 1, true) then
    failed = failed + 1
    if failed == 1 then io.stderr:write("first failure: ", status, " ", body, "\n") end
  end
end
function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + t:get("failed") end
  local e = summary.errors
  bad = bad + e.connect + e.read + e.write + e.timeout
  io.write(string.format('{"requests":%d,"seconds":%.3f,"calls_per_sec":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"errors":%d}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, bad))
end
