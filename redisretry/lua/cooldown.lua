-- cooldown.lua: the fleet cooldown. Publishes a server's hint as an absolute
-- time (keeping the later one) and reads it back.
--
-- KEYS[1]  the time until which the fleet pauses: integer milliseconds of
--          server time
-- ARGV[1]  hint: milliseconds from now to pause (an integer >= 0; 0 only
--          reads)
--
-- Reply: {remaining, now}, integers: milliseconds from now until the end of
-- the cooldown (0 if none), and the server time in milliseconds.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hint = tonumber(ARGV[1])
local cur = tonumber(redis.call("GET", KEYS[1]) or "0") or 0
if hint > 0 and now + hint > cur then
  cur = now + hint
  redis.call("SET", KEYS[1], string.format("%d", cur), "PX", hint)
end
if cur <= now then
  return {0, now}
end
return {cur - now, now}
