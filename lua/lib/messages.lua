-- lib/messages.lua: what the scripts tell a client, on its channel
-- (ARGV[1] .. its client id: wake), every message there is:
--   "G <call id> <token> <ttl ms>" = the lock was handed to you;
--   "H <call id> <pttl ms>" = you head the queue, lock expires in pttl
--   (-2: poll now; set_permits.lua says so to a call it took out
--   of the queue, whose poll then gets its error): sent when the head
--   changes and nobody was granted (a cancel, a refusal, a take by the
--   head itself); after a grant the new head learns it from its client's
--   next heartbeat (position 0 and the lease left, within one watchdog
--   period), so a handoff sends one message, not two;
--   "R <token> <lock key>" = your holds of that lock (KEYS[1]) with
--   tokens up to that one are asked to let go (revoke.lua);
--   "L <token> <lock key>" = your holds of that lock (KEYS[1]) with
--   tokens up to that one were freed by a force release (force_release.lua).
-- An election also speaks on a channel of its own (mutex.lua: ANNOUNCE).

-- The client id of `owner` (an owner id: "<client id>:<thread number,
-- or u<call>>[@<identity>]", the grammar of src/protocol/owner.rs), whose
-- channel it hears on; nil for an id fairlock did not write.
local function client_of(owner)
  return string.match(owner, '^([^:]+):')
end

-- Publishes `message` on the channel of `owner`'s client. How it travels
-- is as the client says in ARGV[1]: a wake prefix with a hash tag ("<key
-- prefix>:wake:{<tag>}:", the tag one of the lock's slot: a client on a
-- Redis Cluster of 7.0 or later) names shard channels, for SPUBLISH, which
-- keeps a message on the lock's shard; one without ("<key prefix>:wake:",
-- a key prefix holds no '{') classic ones, for PUBLISH, which a cluster
-- copies to every node. Decided here, not per call: only a call that
-- wakes someone pays for it.
local function wake(owner, message)
  local client = client_of(owner)
  if client and string.find(WAKE_PREFIX, '{', 1, true) then
    redis.call('SPUBLISH', WAKE_PREFIX .. client, message)
  elseif client then
    redis.call('PUBLISH', WAKE_PREFIX .. client, message)
  end
end
-- @library
-- Decided once per wake prefix in a row (checked_wake_in).
local function wake(owner, message)
  if checked_wake_in ~= WAKE_PREFIX then
    checked_sharded = string.find(WAKE_PREFIX, '{', 1, true) ~= nil
    checked_wake_in = WAKE_PREFIX
  end
  local client = client_of(owner)
  if client and checked_sharded then
    redis.call('SPUBLISH', WAKE_PREFIX .. client, message)
  elseif client then
    redis.call('PUBLISH', WAKE_PREFIX .. client, message)
  end
end

-- Tells the holds of each client among `owners` on this lock (KEYS[1]: a
-- lock key, or a counted lock's holders) whose tokens are up to `token`
-- what became of them, once per client (its holds of this lock hear it
-- together): `what` 'R' asks them to let go (a revocation), 'L' says they
-- were freed (a force release).
local function tell_holders(owners, what, token)
  local told = {}
  for _, owner in ipairs(owners) do
    local client = client_of(owner) or owner
    if not told[client] then
      told[client] = true
      wake(owner, what .. ' ' .. token .. ' ' .. KEYS[1])
    end
  end
end
