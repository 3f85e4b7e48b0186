-- bench/accept.lua - wrk script: POST /v1/payments, a unique event per request. An optional cross-check
-- of bench/loadgen.c (scripts/bench uses loadgen); same body, same ids scheme:
--   BENCH_PREFIX=bench-wrk-$(date +%s) wrk -t2 -c64 -d20s -s bench/accept.lua "$API_URL"
-- Needs API_TOKEN in the environment. Rows it creates start with bench-, like every bench row.
-- No response() callback: it would make wrk parse every body; non-2xx answers are counted by wrk
-- itself ("Non-2xx or 3xx responses").
local counter = 0
local prefix
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  local base = os.getenv("BENCH_PREFIX") or ("bench-wrk-" .. os.time())
  prefix = base .. "-t" .. tid
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. (os.getenv("API_TOKEN") or "")
end

function request()
  counter = counter + 1
  local id = prefix .. "-" .. counter
  local body = '{"event_id":"' .. id .. '","payment_id":"' .. id ..
    '","method":"pix","decision":"approved","amount_cents":1500,"currency":"BRL",' ..
    '"payee":{"bank":"001","account":"1234-5"},' ..
    '"payer":{"name":"Maria Silva","document":"12345678909"},' ..
    '"decided_at":"2026-11-29T12:00:00Z"}'
  return wrk.format(nil, "/v1/payments", nil, body)
end

function done(summary, latency, requests)
  io.write(string.format("requests=%d non_2xx=%d socket_errors=%d rate=%.1f p50_ms=%.2f p99_ms=%.2f p999_ms=%.2f\n",
    summary.requests, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency:percentile(99.9) / 1000))
end
