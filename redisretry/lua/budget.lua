-- budget.lua: the fleet retry budget. Counts the fleet's requests and retry
-- permits over a sliding window of slots and grants permits while
-- retries <= max(ratio * requests, floor) (retry.RatioBudget's rule).
--
-- KEYS[1]  requests: a hash of slot epoch -> requests counted in that slot
-- KEYS[2]  retries: a hash of slot epoch -> retry permits granted in that slot
-- KEYS[3]  config: a configuration (ARGV[1] to ARGV[4] joined by "/"),
--          written by a call that found none or another one, for a window
--          and a slot (a string)
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
-- current slot and the slots-1 before it. A key of another type, or a field
-- that is not an epoch with a count (an integer from 0 to 2^53), is not the
-- budget's (another program, or a hand, wrote it): it is deleted, so the
-- budget repairs itself instead of failing until someone deletes it.
--
-- Reply: {granted, epoch, requests, retries, now, other}: the permits granted
-- (counted in the current slot), the current epoch, the window's requests and
-- retries after the call, and the server time in milliseconds, all integers;
-- other is "" or, when config held another configuration, that one (a
-- string): the processes that share a budget must share its configuration,
-- or their slots and limits disagree.
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
local config = ARGV[1] .. "/" .. ARGV[2] .. "/" .. ARGV[3] .. "/" .. ARGV[4]
local epoch = math.floor(now / width)
local oldest = epoch - slots + 1

-- the fields and values of the hash at key; a key of another type is deleted
local function fields(key)
  local kv = redis.pcall("HGETALL", key)
  if kv.err then
    redis.call("DEL", key)
    return {}
  end
  return kv
end

-- the count a field holds, or nil if it is not one
local function count(v)
  local n = tonumber(v)
  if n == nil or n < 0 or n >= 2 ^ 53 or n ~= math.floor(n) then
    return nil
  end
  return n
end

-- the sum of the window's counts in the hash at key: the fields that left
-- the window or are not counts are deleted, and the permits given back are
-- taken off their slot when givenback is true
local function sum(key, givenback)
  local kv = fields(key)
  local total = 0
  for i = 1, #kv, 2 do
    local f = kv[i]
    local e, n = tonumber(f), count(kv[i + 1])
    if e == nil or n == nil or e < oldest then
      redis.call("HDEL", key, f)
    elseif givenback and e == backepoch then
      if n <= back then
        redis.call("HDEL", key, f)
      else
        redis.call("HSET", key, f, string.format("%d", n - back))
        total = total + n - back
      end
    else
      total = total + n
    end
  end
  return total
end

local requests = sum(KEYS[1], false)
local retries = sum(KEYS[2], back > 0 and backepoch >= oldest and backepoch <= epoch)
if add > 0 then
  redis.call("HINCRBY", KEYS[1], string.format("%d", epoch), add)
  requests = requests + add
end
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
local stored = redis.pcall("GET", KEYS[3])
if type(stored) == "table" and stored.err then
  redis.call("DEL", KEYS[3])
  stored = false
end
local other = ""
if stored ~= config then
  redis.call("SET", KEYS[3], config, "PX", ttl)
  other = stored or ""
end
return {granted, epoch, requests, retries, now, other}
