-- GET: the URL given to wrk, or a path picked at random from BENCH_PATHS (job reads).
dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")

local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("seed", counter)
  track_thread(thread)
end

function init(args)
  math.randomseed(os.time() + (seed or 0))
end

function request()
  if paths then
    return timed(wrk.format("GET", paths[math.random(#paths)]))
  end
  return timed(wrk.format("GET", nil))
end
