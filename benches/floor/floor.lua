#!lua name=fairlock_floor
-- The floor of fairlock's mutex cycle: only what its fast paths do (a free
-- lock nobody waits for taken; its lone hold released) and every guarantee
-- they keep: the format word, the waiters flag ('-': nobody queued), the
-- fencing token (the last one + 1, kept in the key), the lease (PX: lease
-- + fence; a release checks PTTL > fence), the holder and call checked
-- before a release, the freeing call kept in the free value (a repeated
-- release is known), the freed key's TTL kept when at most two fence
-- lives. No other path, no argument check: not a lock, a measure.
--
-- KEYS: lock, queue, deadlines (fairlock's three; only the lock is read).
-- floor_take, fairlock's arguments: ARGV wake prefix, fence ms, owner,
--   call id, lease ms, settings (as fairlock's mutex acquire).
-- floor_release, fairlock's arguments: ARGV wake prefix, fence ms, owner,
--   token, call id (as fairlock's mutex release).
-- floor_take_packed: ARGV "<owner>#<call> <fence ms>" (the hold as
--   written), the PX (lease + fence ms), the rest of what a take that
--   queues needs as one string (unread here).
-- floor_release_packed: ARGV "v<format> <token> <owner>#<call> <fence ms> "
--   (the hold's value up to its mark), "v<format> <token> - <owner>#<call>" (the free
--   value), the fence ms.
-- Each take returns the token, each release 0 (-1: not this hold).

local function take(lock, hold, px)
  local stored = redis.call('GET', lock)
  if stored then
    local last, mark = string.match(stored, '^v@FORMAT@ (%d+) %- (.+)$')
    if last then
      local token = last + 1
      redis.call('SET', lock, 'v@FORMAT@ ' .. string.format('%d', token) .. ' ' .. hold .. ' ' .. mark,
        'PX', px)
      return token
    end
  end
  return redis.error_reply('ERR floor: a free lock nobody waits for only')
end

local function release(lock, held, free, fence_s)
  local stored = redis.call('GET', lock)
  if stored and string.find(stored, held, 1, true) == 1 then
    local pttl = redis.call('PTTL', lock)
    local fence = tonumber(fence_s)
    if pttl > fence then
      if pttl <= 2 * fence then
        redis.call('SET', lock, free, 'KEEPTTL')
      else
        redis.call('SET', lock, free, 'PX', fence_s)
      end
      return 0
    end
  end
  return -1
end

redis.register_function('floor_take', function(keys, args)
  return take(keys[1], args[3] .. '#' .. args[4] .. ' ' .. args[2], args[5] + args[2])
end)

redis.register_function('floor_release', function(keys, args)
  local held = 'v@FORMAT@ ' .. args[4] .. ' ' .. args[3] .. '#' .. args[5] .. ' ' .. args[2] .. ' '
  return release(keys[1], held, 'v@FORMAT@ ' .. args[4] .. ' - ' .. args[3] .. '#' .. args[5], args[2])
end)

redis.register_function('floor_take_packed', function(keys, args)
  return take(keys[1], args[1], args[2])
end)

redis.register_function('floor_release_packed', function(keys, args)
  return release(keys[1], args[1], args[2], args[3])
end)
