-- gcra.lua: the fleet quota. One GCRA reservation (the algorithm of
-- go-redis/redis_rate) of a block of the fleet's schedule, taken only if its
-- first request can start within a maximum wait, plus a heartbeat of the
-- calling process so that the fleet's size is known.
--
-- KEYS[1]  the schedule: a hash of tat, the theoretical arrival time (TAT:
--          integer microseconds of server time at which the schedule is free
--          again), and at, the server time (µs) when tat was written
-- KEYS[2]  the members: a sorted set of process ids scored by their last call,
--          in milliseconds of server time
-- ARGV[1]  inc: microseconds of schedule the block takes (an integer >= 0;
--          0 reserves nothing: a probe and heartbeat)
-- ARGV[2]  tol: the burst tolerance of the first request, microseconds (>= 0)
-- ARGV[3]  maxwait: microseconds; the block is taken only if its first request
--          can start less than maxwait after now; -1 for no limit
-- ARGV[4]  the calling process's id
-- ARGV[5]  how long a process counts as a member after its last call, ms
-- ARGV[6]  offset: microseconds from now where the block starts at the
--          earliest (absent means 0): after now (> 0) for callers that cannot
--          use a slot before the reply reaches them; before now (< 0) where
--          the schedule is free then, for a process reserving what it let
--          start without Redis at about the time it did
-- ARGV[7]  until: server time (µs) after which the caller no longer waits for
--          the reply (absent or 0: none); a call run later (a server stopped
--          with SIGSTOP runs what it received when it resumes) reserves
--          nothing and answers ok 0
--
-- Reply: {ok, wait, from, to, now, members}, all integers. ok is 1 if the
-- block was reserved, 0 if its first request would have had to wait maxwait or
-- more (nothing is changed then). wait: microseconds from now until the first
-- request may start (when ok is 0: how long it would have had to wait).
-- from, to: the block on the schedule, absolute microseconds (from = to when
-- nothing was reserved; from is before now by up to -offset). now: the
-- server's time, microseconds. members: the number of processes that called
-- within ARGV[5] ms.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local inc = tonumber(ARGV[1])
local tol = tonumber(ARGV[2])
local maxwait = tonumber(ARGV[3])
local ttl = tonumber(ARGV[5])
local offset = tonumber(ARGV[6]) or 0
local untl = tonumber(ARGV[7]) or 0

local nowms = math.floor(now / 1000)
redis.call("ZADD", KEYS[2], string.format("%d", nowms), ARGV[4])
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", string.format("(%d", nowms - ttl))
redis.call("PEXPIRE", KEYS[2], ttl)
local members = redis.call("ZCARD", KEYS[2])

local v = redis.call("HMGET", KEYS[1], "tat", "at")
local tat = tonumber(v[1]) or 0
local at = tonumber(v[2]) or 0
-- The server's clock went back since (it was set, or a failover reached a
-- server whose clock is behind): the schedule goes back with it, or the
-- fleet would wait for the difference.
if at > now then
  tat = tat - (at - now)
end
if untl > 0 and now > untl then
  -- Nobody waits for this reply: reserve nothing.
  if tat < now then
    tat = now
  end
  local start = tat - tol
  if start < now then
    start = now
  end
  return {0, start - now, tat, tat, now, members}
end
if tat < now + offset then
  tat = now + offset
end
local start = tat - tol
if start < now then
  start = now
end
local wait = start - now
if maxwait >= 0 and wait >= maxwait then
  return {0, wait, tat, tat, now, members}
end
if inc > 0 then
  local new = tat + inc
  redis.call("HSET", KEYS[1], "tat", string.format("%d", new), "at", string.format("%d", now))
  -- Kept until the TAT passes, and as long as a block may be placed back.
  local keep = new - now
  if keep < -offset then
    keep = -offset
  end
  redis.call("PEXPIRE", KEYS[1], math.floor(keep / 1000) + 1)
  return {1, wait, tat, new, now, members}
end
return {1, wait, tat, tat, now, members}
