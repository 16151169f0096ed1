-- POST /api/v1/jobs/: a cron job in the bench project (BENCH_PROJECT), a distinct name each time.
-- The URL is a public IP literal: saving a job resolves its host name (to refuse private
-- addresses early), and this sandbox has no DNS, where a lookup fails only after 50-200 ms,
-- which would measure the sandbox's resolver rather than the API.
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
  track_thread(thread)
end

function request()
  counter = counter + 1
  local body = string.format(
    '{"project": "%s", "name": "bench create %s-%d-%d", ' ..
    '"schedule": {"type": "cron", "expression": "*/5 * * * *", "timezone": "Europe/Berlin"}, ' ..
    '"request": {"url": "https://93.184.215.14/hooks/bench", "method": "POST", "body": "{}"}}',
    project, run, tid or 0, counter)
  return timed(wrk.format("POST", nil, nil, body))
end
