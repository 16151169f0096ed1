-- POST /api/v1/jobs/: a cron job in the bench project (BENCH_PROJECT), a distinct name each time.
dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local project = os.getenv("BENCH_PROJECT")
local run = os.getenv("BENCH_RUN") or "0"
local counter = 0
local thread_id = 0

function setup(thread)
  thread_id = thread_id + 1
  thread:set("tid", thread_id)
end

function request()
  counter = counter + 1
  local body = string.format(
    '{"project": "%s", "name": "bench create %s-%d-%d", ' ..
    '"schedule": {"type": "cron", "expression": "*/5 * * * *", "timezone": "Europe/Berlin"}, ' ..
    '"request": {"url": "https://example.com/hooks/bench", "method": "POST", "body": "{}"}}',
    project, run, tid or 0, counter)
  return wrk.format("POST", nil, nil, body)
end
