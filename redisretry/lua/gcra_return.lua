-- gcra_return.lua: a process of the fleet quota leaves (Quota.Close). It
-- gives back the unused end of its last block of the schedule, when no
-- process has reserved after it, and it stops counting as a member: it is
-- removed from the members, the members older than ARGV[4] are forgotten,
-- and the schedule's count n (gcra.lua) is brought up to date, so that the
-- processes that stay take their share of a fleet without it at once
-- instead of MemberTTL later.
--
-- KEYS[1]  the schedule, a hash of tat, at and n (gcra.lua)
-- KEYS[2]  the members, a sorted set of process ids scored by their last
--          call in ms (gcra.lua); absent when ARGV[3] is
-- ARGV[1]  to: the end of the block, as gcra.lua returned it (microseconds)
-- ARGV[2]  unused: microseconds of schedule at the block's end to give back
--          (0 or less: none)
-- ARGV[3]  the id of the process that leaves; absent or "": none (the
--          give-back only, and nothing counted)
-- ARGV[4]  how long a process counts as a member after its last call, ms
--          (gcra.lua's ARGV[5]); absent or not a number: none is forgotten
--          by age
--
-- The count n is written only where the schedule exists and holds a tat
-- that is a time (gcra.lua deletes another one), and only if it held
-- another count or none (a hash of an older version); where no member is
-- left, n is deleted instead (the next call of gcra.lua, lazy or not, is
-- then a heartbeat and counts its caller). A key of another
-- type at KEYS[1] or KEYS[2] is not the quota's: it is deleted (as gcra.lua
-- does).
--
-- Reply: {returned, members}: returned is 1 if the schedule was moved back,
-- 0 if another reservation follows the block (or the key is gone, or
-- nothing was given back): nothing is moved then. members is the number of
-- members after ARGV[3] left (counted as a heartbeat counts them), -1 when
-- ARGV[3] is absent.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local to = tonumber(ARGV[1])
local unused = tonumber(ARGV[2]) or 0
local member = ARGV[3] or ""
local ttl = tonumber(ARGV[4])

-- a time the schedule holds, or nil if the field is not one (gcra.lua)
local function time(f)
  local n = tonumber(f)
  if n == nil or n < 0 or n >= 2 ^ 53 or n ~= math.floor(n) then
    return nil
  end
  return n
end

local v = redis.pcall("HMGET", KEYS[1], "tat", "at", "n")
if v.err then
  redis.call("DEL", KEYS[1])
  v = {false, false, false}
end
local exists = v[1] and time(v[1]) ~= nil

local returned = 0
local cur = tonumber(v[1])
if cur ~= nil and to ~= nil and cur == to and unused > 0 then
  returned = 1
  local at = tonumber(v[2]) or 0
  local new = to - unused
  local left = new - now
  if at > now then
    left = left - (at - now) -- the clock went back since (see gcra.lua)
  end
  if left <= 0 then
    redis.call("DEL", KEYS[1])
    exists = false
  else
    redis.call("HSET", KEYS[1], "tat", string.format("%d", new))
    redis.call("PEXPIRE", KEYS[1], math.floor(left / 1000) + 1)
  end
end

if member == "" then
  return {returned, -1}
end
local removed = redis.pcall("ZREM", KEYS[2], member)
if type(removed) == "table" and removed.err then
  redis.call("DEL", KEYS[2])
end
if ttl ~= nil then
  local nowms = math.floor(now / 1000)
  redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", string.format("(%d", nowms - ttl))
end
local count = redis.call("ZCARD", KEYS[2])
if exists and count == 0 then
  -- Nobody is left: no count, so that the next call, lazy or not, is a
  -- heartbeat (a lazy call would otherwise take 0 members).
  redis.call("HDEL", KEYS[1], "n")
elseif exists and time(v[3] or "") ~= count then
  redis.call("HSET", KEYS[1], "n", count)
end
return {returned, count}
