-- cooldown.lua: the fleet cooldown. Publishes a server's hint as an absolute
-- time (keeping the later one) and reads it back.
--
-- KEYS[1]  the time until which the fleet pauses: integer milliseconds of
--          server time
-- ARGV[1]  hint: milliseconds from now to pause (an integer >= 0; 0 only
--          reads)
--
-- A key of another type, or a string that is not such a time (an integer
-- from 0 to 2^53), is not the cooldown's (another program, or a hand, wrote
-- it): it is deleted, so the cooldown repairs itself instead of failing until
-- someone deletes it.
--
-- Reply: {remaining, now}, integers: milliseconds from now until the end of
-- the cooldown (0 if none), and the server time in milliseconds.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hint = tonumber(ARGV[1])
local v = redis.pcall("GET", KEYS[1])
local cur = 0
if type(v) == "table" and v.err then
  redis.call("DEL", KEYS[1])
elseif v then
  cur = tonumber(v)
  if cur == nil or cur < 0 or cur >= 2 ^ 53 or cur ~= math.floor(cur) then
    redis.call("DEL", KEYS[1])
    cur = 0
  end
end
if hint > 0 and now + hint > cur then
  cur = now + hint
  redis.call("SET", KEYS[1], string.format("%d", cur), "PX", hint)
end
if cur <= now then
  return {0, now}
end
return {cur - now, now}
