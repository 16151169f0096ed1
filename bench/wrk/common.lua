-- Shared by every scenario: the API key header, the paced clients' think time and timing,
-- and a done() that prints one JSON line with the latency percentiles (in microseconds)
-- for bench_api.py to parse.
-- Environment: BENCH_API_KEY (the key), BENCH_PATHS (file with one path per line, optional),
-- BENCH_THINK_MS (paced clients), BENCH_WARMUP_MS (paced clients: requests sent earlier
-- than this after a client's first one are left out of the figures; default 5000).
-- Each scenario's setup(thread) must call track_thread(thread).

local key = os.getenv("BENCH_API_KEY")
if key and key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end
wrk.headers["Accept"] = "application/json"

paths = nil
local paths_file = os.getenv("BENCH_PATHS")
if paths_file and paths_file ~= "" then
  paths = {}
  for line in io.lines(paths_file) do
    if line ~= "" then paths[#paths + 1] = line end
  end
end

local threads = {}
function track_thread(thread)
  threads[#threads + 1] = thread
end

-- Paced clients (BENCH_THINK_MS): like a load-test user (locust), a client sends its first
-- request at once and then waits about the think time (0.5x to 1.5x, so the clients drift
-- apart) after each answer; without it every connection sends its next request as soon as
-- the answer arrives (closed loop). bench_api.py runs paced clients one connection per wrk
-- thread, so request() and response() below pair up and the latency is timed here: wrk's
-- own histogram cannot leave out the start-up, when every client connects at once.
local think = tonumber(os.getenv("BENCH_THINK_MS") or "")
paced = think ~= nil and think > 0
samples = {}  -- this thread's latencies in microseconds (read by done() through thread:get)

if paced then
  local ffi = require("ffi")
  ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
    int clock_gettime(int clock_id, bench_timespec *tp);
  ]]
  local CLOCK_MONOTONIC = 1
  local now = ffi.new("bench_timespec")
  local function now_us()
    ffi.C.clock_gettime(CLOCK_MONOTONIC, now)
    return tonumber(now.tv_sec) * 1e6 + tonumber(now.tv_nsec) / 1e3
  end
  local warmup_us = tonumber(os.getenv("BENCH_WARMUP_MS") or "5000") * 1000
  local measure_from = nil
  local started = nil
  local first = true

  function delay()
    if first then  -- the first request goes at once
      first = false
      return 0
    end
    return math.random(math.floor(think / 2), math.floor(think * 3 / 2))
  end

  -- Called by each scenario's request() with the request it built: wrk sends it right away.
  function timed(request)
    local at = now_us()
    measure_from = measure_from or at + warmup_us
    started = at >= measure_from and at or nil
    return request
  end

  function response(status, headers, body)
    if started then
      samples[#samples + 1] = now_us() - started
      started = nil
    end
  end
else
  function timed(request)
    return request
  end
end

local function percentile(sorted, p)
  if #sorted == 0 then return 0 end
  return sorted[math.max(1, math.ceil(#sorted * p / 100))]
end

function done(summary, latency, requests)
  local errors = summary.errors
  local p50, p95, p99, max, measured = latency:percentile(50), latency:percentile(95),
    latency:percentile(99), latency.max, summary.requests
  if paced then
    local all = {}
    for _, thread in ipairs(threads) do
      for _, us in ipairs(thread:get("samples")) do all[#all + 1] = us end
    end
    table.sort(all)
    p50, p95, p99, max, measured = percentile(all, 50), percentile(all, 95), percentile(all, 99),
      all[#all] or 0, #all
  end
  io.write(string.format(
    'BENCH_RESULT {"requests": %d, "measured": %d, "duration_us": %d, "p50_us": %d, "p95_us": %d, ' ..
    '"p99_us": %d, "max_us": %d, "connect_errors": %d, "read_errors": %d, "write_errors": %d, ' ..
    '"timeouts": %d, "non_2xx": %d}\n',
    summary.requests, measured, summary.duration, p50, p95, p99, max, errors.connect, errors.read,
    errors.write, errors.timeout, errors.status))
end
