-- gcra.lua: the fleet quota. One GCRA reservation (the algorithm of
-- go-redis/redis_rate) of a block of the fleet's schedule, taken only if its
-- first request can start within a maximum wait, plus a heartbeat of the
-- calling process so that the fleet's size is known.
--
-- KEYS[1]  the schedule: a hash of tat, the theoretical arrival time (TAT:
--          integer microseconds of server time at which the schedule is free
--          again), at, the server time (µs) when tat was written, limit
--          (ARGV[8]) and n, the members as last counted (ARGV[9])
-- KEYS[2]  the members: a sorted set of process ids scored by their last call,
--          in milliseconds of server time (gcra_return.lua removes a process
--          that closes, and keeps the new count in n)
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
-- ARGV[8]  the calling process's limit (absent or "": none), e.g. "40/1s";
--          kept in the schedule's field limit by a call that reserves
-- ARGV[9]  "lazy" to skip the heartbeat: the members are then as the
--          schedule's field n last counted them (a call that finds no n, or
--          one that is not a count, is a heartbeat all the same); absent or
--          anything else: a heartbeat. A heartbeat adds the caller to
--          KEYS[2], forgets the members older than ARGV[5], counts them and
--          keeps the count in n (in the write of a call that reserves, else
--          only where the schedule exists and held another count). Each
--          process sends one at least every second while it calls (see
--          quota.go), so a lazy call costs four commands instead of eight.
-- ARGV[10] "live" to reserve only on a schedule that runs ahead of now (tat
--          after now): a process reserving what it let start while its
--          replies came late, beside processes that drew the schedule on;
--          a schedule nobody drew ahead of now (Redis was stopped for
--          everybody, or the fleet is idle) reserves nothing and answers
--          ok 0, and the process places it back later (ARGV[6] < 0).
--          Absent or anything else: reserve wherever the schedule is.
--
-- A key of another type at KEYS[1] or KEYS[2], or a tat or an at that is not
-- such a time (an integer from 0 to 2^53), is not the quota's (another
-- program, or a hand, wrote it): it is deleted, so the quota repairs itself
-- instead of failing until someone deletes it.
--
-- Reply: {ok, wait, from, to, now, members, other}: the first six integers,
-- other a string. ok is 1 if the block was reserved, 0 if its first request
-- would have had to wait maxwait or more (nothing is changed then). wait:
-- microseconds from now until the first request may start (when ok is 0:
-- how long it would have had to wait). from, to: the block on the schedule,
-- absolute microseconds (from = to when nothing was reserved; from is before
-- now by up to -offset). now: the server's time, microseconds. members: the
-- number of processes that called within ARGV[5] ms before the last
-- heartbeat (this call, unless it was lazy). other is "" or, when the
-- schedule was last reserved under another limit than ARGV[8], that limit:
-- the processes that share a quota must share its limit, or the schedule is
-- paced by several.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local inc = tonumber(ARGV[1])
local tol = tonumber(ARGV[2])
local maxwait = tonumber(ARGV[3])
local ttl = tonumber(ARGV[5])
local offset = tonumber(ARGV[6]) or 0
local untl = tonumber(ARGV[7]) or 0
local limit = ARGV[8] or ""
local live = ARGV[10] == "live"

-- a time the schedule holds, or nil if the field is not one
local function time(f)
  local n = tonumber(f)
  if n == nil or n < 0 or n >= 2 ^ 53 or n ~= math.floor(n) then
    return nil
  end
  return n
end

local v = redis.pcall("HMGET", KEYS[1], "tat", "at", "limit", "n")
if v.err then
  redis.call("DEL", KEYS[1])
  v = {false, false, false, false}
end
local tat = time(v[1] or "0")
local at = time(v[2] or "0")
if tat == nil or at == nil then
  redis.call("DEL", KEYS[1])
  tat, at = 0, 0
  v = {false, false, false, false}
end

-- The members: counted by a heartbeat, else as the schedule keeps them.
local members = time(v[4] or "")
local beat = ARGV[9] ~= "lazy" or members == nil
local pending = false
if beat then
  local nowms = math.floor(now / 1000)
  local added = redis.pcall("ZADD", KEYS[2], string.format("%d", nowms), ARGV[4])
  if type(added) == "table" and added.err then
    redis.call("DEL", KEYS[2])
    redis.call("ZADD", KEYS[2], string.format("%d", nowms), ARGV[4])
  end
  redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", string.format("(%d", nowms - ttl))
  redis.call("PEXPIRE", KEYS[2], ttl)
  local count = redis.call("ZCARD", KEYS[2])
  -- A schedule that exists keeps another count, even if nothing is
  -- reserved (keepn; a reservation writes it with the rest).
  pending = v[1] and count ~= members
  members = count
end
local function keepn()
  if pending then
    redis.call("HSET", KEYS[1], "n", members)
  end
end
local other = ""
if limit ~= "" and v[3] and v[3] ~= limit then
  other = v[3]
end
-- The server's clock went back since (it was set, or a failover reached a
-- server whose clock is behind): the schedule goes back with it, or the
-- fleet would wait for the difference.
if at > now then
  tat = tat - (at - now)
end
if (untl > 0 and now > untl) or (live and tat <= now) then
  -- Nobody waits for this reply, or a live call finds the schedule idle:
  -- reserve nothing.
  if tat < now then
    tat = now
  end
  local start = tat - tol
  if start < now then
    start = now
  end
  keepn()
  return {0, start - now, tat, tat, now, members, other}
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
  keepn()
  return {0, wait, tat, tat, now, members, other}
end
if inc > 0 then
  local new = tat + inc
  local ts, ats = string.format("%d", new), string.format("%d", now)
  if beat and limit ~= "" then
    redis.call("HSET", KEYS[1], "tat", ts, "at", ats, "limit", limit, "n", members)
  elseif beat then
    redis.call("HSET", KEYS[1], "tat", ts, "at", ats, "n", members)
  elseif limit ~= "" and v[3] ~= limit then
    redis.call("HSET", KEYS[1], "tat", ts, "at", ats, "limit", limit)
  else
    redis.call("HSET", KEYS[1], "tat", ts, "at", ats) -- the limit kept is this call's, or none was sent
  end
  -- Kept until the TAT passes, and as long as a block may be placed back.
  local keep = new - now
  if keep < -offset then
    keep = -offset
  end
  redis.call("PEXPIRE", KEYS[1], math.floor(keep / 1000) + 1)
  return {1, wait, tat, new, now, members, other}
end
keepn()
return {1, wait, tat, tat, now, members, other}
