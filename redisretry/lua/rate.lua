-- rate.lua: the fleet's learnt rate, for a capacity that has no number (a
-- shared pool). One rate for every process of the fleet: cut by a factor on
-- a congestion signal (a 429) of an attempt paced at the current rate, at
-- most once per epoch, and grown while the fleet uses it: back to where it
-- was cut by a scale-free CUBIC curve, then past it doubling every recovery.
-- Every number is an integer: rates in micro-requests per second (µreq/s),
-- times in microseconds of server time.
--
-- KEYS[1]  the state: a hash of epoch (cuts so far), wmax (the rate before
--          the last cut; the ceiling at first), grown (µs the rate was used
--          since the last cut), at (the last call that said the rate was used,
--          or the last cut, or the state's start), n and nt (attempts
--          counted since nt), meas (the send rate last measured, µreq/s),
--          ug (µs the rate was used since nt) and uw (the share of the last
--          window it was used, in millionths); a hash without ug and uw
--          (written before they were kept) reads them as 0; hold (the
--          end of the last cut's hold, µs; absent: none); mp (the send rate
--          measured over the window before the last, µreq/s; absent: 0);
--          k and r (attempts served and rejected counted since nt; absent: 0)
--          and ok (the served rate of the last window if it was flooded:
--          it lasted at most two windows, served at least one attempt and
--          rejected at least as many; µreq/s; else 0); kt (the nt that k,
--          r and ok belong to: another nt, a window closed by a script that
--          did not keep them, resets them)
-- ARGV[1]  epoch: the epoch under which the caller paced an attempt that met
--          congestion; -1 for none (a read)
-- ARGV[2]  used: µs the rate held the caller's attempts back since its
--          last call (their waits; MaxWait for one refused), at least 1, or 0
--          if it did not (the rate grows only then, by that much at most)
-- ARGV[3]  sent: attempts the caller started since its last call
-- ARGV[4]  beta: the factor of a cut, in millionths (700000: x0.7)
-- ARGV[5]  recovery: µs the rate, used all the while, takes to climb back to
--          where it was cut (> 0)
-- ARGV[6]  floor, ARGV[7] ceiling: the bounds of the rate (µreq/s)
-- ARGV[8]  ttl: ms the state is kept after the last call
-- ARGV[9]  hold: with a report, µs the server said it would stay full (its
--          429's retry hint), at most recovery; 0 or absent for none. A cut
--          holds the next one until then: the 429s of that time say the
--          server is still full (a window that has not freed yet), not that
--          the cut rate is too high
-- ARGV[10] served, ARGV[11] rejected: the caller's attempts that ended
--          since its last call without a 429 and with one (absent: 0): a
--          window in which the fleet met as many 429s as it was served says
--          the fleet is far above the capacity (see hold)
--
-- A key of another type, or a field that is not such an integer (0 to
-- 2^53), is not the rate's (another program, or a hand, wrote it): it is
-- deleted and the rate starts again, at the ceiling.
--
-- Reply: {rate, epoch, cut, now, meas}, integers: the learnt rate now
-- (µreq/s), the epoch after the call, 1 if this call cut the rate, the
-- server's time (µs), and the fleet's send rate last measured (µreq/s, 0 for
-- none yet).
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local report = tonumber(ARGV[1])
local used = tonumber(ARGV[2])
local beta = tonumber(ARGV[4])
local rec = tonumber(ARGV[5])
local floor = tonumber(ARGV[6])
local ceil = tonumber(ARGV[7])
local ttl = tonumber(ARGV[8])
local holdFor = tonumber(ARGV[9]) or 0
-- A count of one call is at most 2^31: the numbers are doubles, exact to
-- 2^53.
local function count(x)
  if x == nil or x ~= x or x < 0 then
    return 0
  end
  if x > 2147483648 then
    return 2147483648
  end
  return math.floor(x)
end
local sent = count(tonumber(ARGV[3]))
local served = count(tonumber(ARGV[10]))
local rejected = count(tonumber(ARGV[11]))
if holdFor > rec then
  holdFor = rec
end
if holdFor < 0 then
  holdFor = 0
end
local window = 1000000

local function int(f)
  local n = tonumber(f)
  if n == nil or n < 0 or n >= 2 ^ 53 or n ~= math.floor(n) then
    return nil
  end
  return n
end

local epoch, wmax, grown, at, n, nt, meas, ug, uw, hold, mp, nk, nr, ok, kt
local v = redis.pcall("HMGET", KEYS[1], "epoch", "wmax", "grown", "at", "n", "nt", "meas", "ug", "uw", "hold", "mp", "k", "r", "ok", "kt")
if v.err then
  redis.call("DEL", KEYS[1])
  v = {false}
end
if v[1] then
  epoch, wmax, grown, at = int(v[1]), int(v[2]), int(v[3]), int(v[4])
  n, nt, meas = int(v[5]), int(v[6]), int(v[7])
  ug, uw, hold, mp, nk, nr, ok, kt = 0, 0, 0, 0, 0, 0, 0, 0
  if v[8] then
    ug = int(v[8])
  end
  if v[9] then
    uw = int(v[9])
  end
  if v[10] then
    hold = int(v[10])
  end
  if v[11] then
    mp = int(v[11])
  end
  if v[12] then
    nk = int(v[12])
  end
  if v[13] then
    nr = int(v[13])
  end
  if v[14] then
    ok = int(v[14])
  end
  if v[15] then
    kt = int(v[15])
  end
  if epoch == nil or wmax == nil or grown == nil or at == nil or n == nil or nt == nil or meas == nil or ug == nil or uw == nil or hold == nil or mp == nil or nk == nil or nr == nil or ok == nil or kt == nil then
    redis.call("DEL", KEYS[1])
    epoch = nil
  end
end
if epoch == nil then
  epoch, wmax, grown, at, n, nt, meas, ug, uw, hold, mp, nk, nr, ok, kt = 0, ceil, rec, now, 0, now, 0, 0, 0, 0, 0, 0, 0, 0, now
end
if kt ~= nt then
  nk, nr, ok, kt = 0, 0, 0, nt
end

-- Growth, while used: the time the caller was held back, at most the time
-- since the last call that said so (or the last cut) and a window. Calls
-- that do not say so (a process that was not held back, or one reading the
-- rate before its first attempt) take nothing away: many processes call in
-- turn, and the rate is used while any of them is held back; a fleet that
-- went quiet grows a window at most. During a hold the rate does not grow:
-- the server said it is full.
if used > 0 then
  if now > at then
    local d = now - at
    if d > used then
      d = used
    end
    if d > window then
      d = window
    end
    if now >= hold then
      grown = grown + d
    end
    ug = ug + d
  end
  at = now
end
if grown > 64 * rec then
  grown = 64 * rec
end
-- The fleet's send rate, over windows; what it served, over a window that
-- met 429s.
n = n + sent
nk = nk + served
nr = nr + rejected
if now < nt then
  n, nt, ug, nk, nr, ok = 0, now, 0, 0, 0, 0
elseif now - nt >= window then
  mp = meas
  meas = math.floor(n * 1e12 / (now - nt))
  local u = ug
  if u > now - nt then
    u = now - nt
  end
  uw = math.floor(u * 1e6 / (now - nt))
  ok = 0
  if nr > 0 and nr >= nk and now - nt <= 2 * window then
    ok = math.floor(nk * 1e12 / (now - nt))
  end
  n, nt, ug, nk, nr = 0, now, 0, 0, 0
end
kt = nt

-- Up to rec: wmax x (1 - (1-beta)(1 - grown/rec)^3); past it, doubling every
-- rec (linearly within a doubling: wmax x 2^k x (1+f), u = grown/rec - 1 =
-- k + f), at most 2^62. Each operation rounded on its own (ldexp is exact).
local function curve(w, g)
  if g > rec then
    local u = (g - rec) / rec
    local k = math.floor(u)
    local r = math.ldexp(w, k) * (1 + (u - k))
    if r > 2 ^ 62 then
      r = 2 ^ 62
    end
    return math.floor(r)
  end
  local x = (rec - g) / rec
  local x3 = (x * x) * x
  local d = (1000000 - beta) / 1000000
  local f = 1 - d * x3
  return math.floor(w * f)
end
local function clamp(r)
  if r > ceil then
    r = ceil
  end
  if r < floor then
    r = floor
  end
  return r
end

local rate = clamp(curve(wmax, grown))
local cut = 0
if hold > now + rec then
  hold = 0 -- the server's clock went back: a hold is never longer
end
if report >= 0 and report == epoch and now >= hold then
  local base, fromMeas = rate, false
  -- The rate is not used (the fleet sent less than half of it, and was held
  -- back by it less than half of the last window): cut from what is sent.
  -- The send rate is the higher of the last two windows': a window in which
  -- the processes waited out their 429s' hints (and said nothing) is not
  -- the fleet going quiet.
  local m = meas
  if mp > m then
    m = mp
  end
  if m > 0 and 2 * m < base and 2 * uw < 1000000 then
    base, fromMeas = m, true
  end
  if base < floor then
    base = floor
  end
  wmax, grown, epoch, cut = base, 0, epoch + 1, 1
  at = now -- growth counts from the cut
  rate = clamp(curve(wmax, 0))
  -- A cut from the measure holds the next for the server's hint, unless
  -- the last window was flooded, the cut is from its measure (not the
  -- window's before) and the cut rate is still above twice what it served:
  -- the fleet is far above the capacity (hundreds of processes started at
  -- once), and the 429s to come say so.
  hold = 0
  if fromMeas and (ok == 0 or meas < mp or rate <= 2 * ok) then
    hold = now + holdFor
  end
end

redis.call("HSET", KEYS[1], "epoch", string.format("%d", epoch), "wmax", string.format("%d", wmax),
  "grown", string.format("%d", grown), "at", string.format("%d", at), "n", string.format("%d", n),
  "nt", string.format("%d", nt), "meas", string.format("%d", meas), "ug", string.format("%d", ug),
  "uw", string.format("%d", uw), "hold", string.format("%d", hold), "mp", string.format("%d", mp),
  "k", string.format("%d", nk), "r", string.format("%d", nr), "ok", string.format("%d", ok),
  "kt", string.format("%d", kt))
redis.call("PEXPIRE", KEYS[1], ttl)
return {rate, epoch, cut, now, meas}
