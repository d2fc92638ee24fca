-- gcra_return.lua: gives back the unused end of a block of the fleet quota's
-- schedule, when no process has reserved after it.
--
-- KEYS[1]  the schedule, a hash of tat and at (gcra.lua)
-- ARGV[1]  to: the end of the block, as gcra.lua returned it (microseconds)
-- ARGV[2]  unused: microseconds of schedule at the block's end to give back
--
-- Reply: 1 if the schedule was moved back, 0 if another reservation follows
-- the block (or the key is gone): nothing is changed then. A key of another
-- type is not the quota's: it is deleted (as gcra.lua does), and 0.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.pcall("HMGET", KEYS[1], "tat", "at")
if v.err then
  redis.call("DEL", KEYS[1])
  return 0
end
local cur = tonumber(v[1])
local at = tonumber(v[2]) or 0
local to = tonumber(ARGV[1])
local unused = tonumber(ARGV[2])
if cur == nil or cur ~= to or unused <= 0 then
  return 0
end
local new = to - unused
local left = new - now
if at > now then
  left = left - (at - now) -- the clock went back since (see gcra.lua)
end
if left <= 0 then
  redis.call("DEL", KEYS[1])
  return 1
end
redis.call("HSET", KEYS[1], "tat", string.format("%d", new))
redis.call("PEXPIRE", KEYS[1], math.floor(left / 1000) + 1)
return 1
