"""The shared token buckets (``buckets.py``) in Redis: one hash per user, changed by one Lua script.

The script reads the bucket, refills it for the time since it was last touched, takes the tokens or not, and
writes it back, all in one step Redis runs alone, so concurrent requests from every replica are counted one
after another. It reads the time from Redis (``TIME``), not from the replicas, whose clocks may disagree. Each
bucket is a single key, so under Redis Cluster it lives on the node of its slot like any other key. A bucket
expires when it would be full again: it then says nothing a missing one would not, and idle users leave none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .buckets import RateBuckets
from .keys import rate_key

if TYPE_CHECKING:
    from .redis import RedisBus

# KEYS[1] the bucket; ARGV rate (tokens/s), burst, n. Returns {1, 0} when taken, {0, wait ms} when not.
TAKE = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(saved[1])
local at = tonumber(saved[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local taken = 0
local wait = 0
if tokens >= n then
  tokens = tokens - n
  taken = 1
else
  wait = math.ceil((n - tokens) / rate * 1000)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.17g', now))
local ttl = math.min(math.ceil((burst - tokens) / rate * 1000) + 1000, 1e12)
redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl))
return {taken, wait}
"""


class RedisRateBuckets(RateBuckets):
    """Buckets on the bus's Redis (a single server or a cluster), through its client."""

    def __init__(self, bus: RedisBus) -> None:
        self.bus = bus
        self._script: Any = None

    async def take(self, name: str, n: int, rate: float, burst: int) -> int:
        redis = self.bus.client
        if self._script is None:
            # EVALSHA, loading the script again wherever a node answers NOSCRIPT (a restart, a new node).
            self._script = redis.register_script(TAKE)
        taken, wait = await self._script(keys=[rate_key(self.bus.prefix, name)], args=[repr(rate), burst, n])
        return 0 if int(taken) else max(1, int(wait))
