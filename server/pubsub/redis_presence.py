"""Presence (``presence.py``) in Redis: one hash per session, changed and read by Lua scripts.

Each script runs alone in Redis, reads the time from Redis (``TIME``, so replicas' clocks never decide what has
expired), drops the entries that have, and returns the live ones with the session's set version (a new one
whenever the set changed, dropped entries included). Both keys of a
session carry its id as a hash tag, so under Redis Cluster they live in one slot and a script may use both. The
hash expires a while after its last write, so sessions nobody looks at any more leave nothing behind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from .keys import presence_key, presence_version_key
from .presence import PresenceSet, PresenceStore

if TYPE_CHECKING:
    from .redis import RedisBus

# Shared by the scripts: KEYS[1] the hash, KEYS[2] the version. `live()` drops expired entries and returns the
# rest as a flat list (field, value, ...); `bump()` moves the version to the time in microseconds, or one past
# the last version when the clock has not moved on, so versions only grow, even after the key expired.
_COMMON = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local pruned = false
local function live()
  local out = {}
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local expires = tonumber(string.match(all[i + 1], '^(%d+)|'))
    if expires == nil or expires <= now then
      redis.call('HDEL', KEYS[1], all[i])
      pruned = true
    else
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
    end
  end
  return out
end
local function bump()
  local last = tonumber(redis.call('GET', KEYS[2]) or '0')
  local version = math.max(now_us, last + 1)
  redis.call('SET', KEYS[2], string.format('%d', version), 'PX', '86400000')
  return string.format('%d', version)
end
local function current()
  return redis.call('GET', KEYS[2]) or '0'
end
"""

# ARGV field, entry JSON, ttl ms.
PUT = (
    _COMMON
    + """
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now + ttl) .. '|' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl * 2))
local entries = live()
return {bump(), entries}
"""
)

# ARGV field. {'0'} when there was no such entry.
REMOVE = (
    _COMMON
    + """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return {'0'}
end
local entries = live()
return {bump(), entries}
"""
)

READ = (
    _COMMON
    + """
local entries = live()
if pruned then
  return {bump(), entries}
end
return {current(), entries}
"""
)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _set(reply: Any) -> PresenceSet:
    version, flat = int(_text(reply[0])), reply[1]
    entries: dict[str, dict[str, Any]] = {}
    for i in range(0, len(flat), 2):
        expires, _, body = _text(flat[i + 1]).partition("|")
        entries[_text(flat[i])] = {**orjson.loads(body), "expiresAt": int(expires)}
    return PresenceSet(version, entries)


class RedisPresence(PresenceStore):
    """Presence on the bus's Redis (a single server or a cluster), through its client."""

    def __init__(self, bus: RedisBus) -> None:
        self.bus = bus
        self._scripts: dict[str, Any] = {}

    def _script(self, source: str) -> Any:
        script = self._scripts.get(source)
        if script is None:
            redis = self.bus.client
            script = self._scripts[source] = redis.register_script(source)
        return script

    def _keys(self, session_id: str) -> list[str]:
        return [presence_key(self.bus.prefix, session_id), presence_version_key(self.bus.prefix, session_id)]

    async def put(self, session_id: str, key: str, entry: dict[str, Any], ttl_seconds: float) -> PresenceSet:
        body = orjson.dumps({k: v for k, v in entry.items() if k != "expiresAt"}).decode()
        reply = await self._script(PUT)(keys=self._keys(session_id), args=[key, body, int(ttl_seconds * 1000)])
        return _set(reply)

    async def remove(self, session_id: str, key: str) -> PresenceSet | None:
        reply = await self._script(REMOVE)(keys=self._keys(session_id), args=[key])
        return None if int(_text(reply[0])) == 0 else _set(reply)

    async def read(self, session_id: str) -> PresenceSet:
        return _set(await self._script(READ)(keys=self._keys(session_id), args=[]))
