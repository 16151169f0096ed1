-- Shared by every scenario: the API key header, and a done() that prints one JSON line
-- with the latency percentiles (wrk measures in microseconds) for bench_api.py to parse.
-- Environment: BENCH_API_KEY (the key), BENCH_PATHS (file with one path per line, optional).

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

-- Paced clients (BENCH_THINK_MS): each connection waits about that long (0.5x to 1.5x, so
-- the clients drift apart) before its next request, like a load-test user with a think
-- time; without it every connection sends its next request as soon as the answer arrives.
local think = tonumber(os.getenv("BENCH_THINK_MS") or "")
if think and think > 0 then
  function delay()
    return math.random(math.floor(think / 2), math.floor(think * 3 / 2))
  end
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests": %d, "duration_us": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, ' ..
    '"max_us": %d, "connect_errors": %d, "read_errors": %d, "write_errors": %d, "timeouts": %d, "non_2xx": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(95), latency:percentile(99),
    latency.max, errors.connect, errors.read, errors.write, errors.timeout, errors.status))
end
