-- gcra_return.lua: gives back the unused end of a block of the fleet quota's
-- schedule, when no process has reserved after it.
--
-- KEYS[1]  the theoretical arrival time (TAT), integer microseconds (gcra.lua)
-- ARGV[1]  to: the end of the block, as gcra.lua returned it (microseconds)
-- ARGV[2]  unused: microseconds of schedule at the block's end to give back
--
-- Reply: 1 if the schedule was moved back, 0 if another reservation follows
-- the block (or the key is gone): nothing is changed then.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cur = tonumber(redis.call("GET", KEYS[1]) or "")
local to = tonumber(ARGV[1])
local unused = tonumber(ARGV[2])
if cur == nil or cur ~= to or unused <= 0 then
  return 0
end
local new = to - unused
if new <= now then
  redis.call("DEL", KEYS[1])
  return 1
end
redis.call("SET", KEYS[1], string.format("%d", new), "PX", math.floor((new - now) / 1000) + 1)
return 1
