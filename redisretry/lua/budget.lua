-- budget.lua: the fleet retry budget. Counts the fleet's requests and retry
-- permits over a sliding window of slots and grants permits while
-- retries <= max(ratio * requests, floor) (retry.RatioBudget's rule).
--
-- KEYS[1]  requests: a hash of slot epoch -> requests counted in that slot
-- KEYS[2]  retries: a hash of slot epoch -> retry permits granted in that slot
-- ARGV[1]  the width of a slot, milliseconds (an integer >= 1)
-- ARGV[2]  the number of slots in the window (an integer >= 1)
-- ARGV[3]  ratio: retries allowed per request (a decimal string)
-- ARGV[4]  floor: retries allowed per window whatever the traffic (a decimal string)
-- ARGV[5]  requests to add to the current slot (an integer >= 0)
-- ARGV[6]  permits wanted (an integer >= 0)
-- ARGV[7]  permits given back (an integer >= 0; unused permits of a lease)
-- ARGV[8]  the epoch of the slot the given-back permits were granted in
--
-- A slot's epoch is floor(server time in ms / width); the window is the
-- current slot and the slots-1 before it. Reply: {granted, epoch, requests,
-- retries, now}, all integers: the permits granted (counted in the current
-- slot), the current epoch, the window's requests and retries after the call,
-- and the server time in milliseconds.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local width = tonumber(ARGV[1])
local slots = tonumber(ARGV[2])
local ratio = tonumber(ARGV[3])
local floor = tonumber(ARGV[4])
local add = tonumber(ARGV[5])
local want = tonumber(ARGV[6])
local back = tonumber(ARGV[7])
local backepoch = tonumber(ARGV[8])
local epoch = math.floor(now / width)
local oldest = epoch - slots + 1

-- sum of the window's slots, deleting the slots that left it
local function sum(key)
  local kv = redis.call("HGETALL", key)
  local total = 0
  for i = 1, #kv, 2 do
    local e = tonumber(kv[i])
    if e == nil or e < oldest then
      redis.call("HDEL", key, kv[i])
    else
      total = total + tonumber(kv[i + 1])
    end
  end
  return total
end

if back > 0 and backepoch >= oldest and backepoch <= epoch then
  local f = string.format("%d", backepoch)
  local cur = tonumber(redis.call("HGET", KEYS[2], f) or "0") or 0
  if cur <= back then
    redis.call("HDEL", KEYS[2], f)
  else
    redis.call("HSET", KEYS[2], f, string.format("%d", cur - back))
  end
end
if add > 0 then
  redis.call("HINCRBY", KEYS[1], string.format("%d", epoch), add)
end
local requests = sum(KEYS[1])
local retries = sum(KEYS[2])
local limit = math.floor(math.max(ratio * requests, floor))
local granted = 0
if want > 0 and limit - retries > 0 then
  granted = math.min(want, limit - retries)
  redis.call("HINCRBY", KEYS[2], string.format("%d", epoch), granted)
  retries = retries + granted
end
local ttl = width * (slots + 1)
redis.call("PEXPIRE", KEYS[1], ttl)
redis.call("PEXPIRE", KEYS[2], ttl)
return {granted, epoch, requests, retries, now}
