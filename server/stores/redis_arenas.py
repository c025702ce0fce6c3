"""The arenas on Redis (:class:`~blackdrez.server.stores.base.Arenas`).

Theory of operation
-------------------
Each arena's keys carry its id as a hash tag (``bd:a:{A}:info``, ``:standings``, ``:games``;
:mod:`blackdrez.server.stores.keys`), so :meth:`RedisArenas.update` is one script on one slot,
on a single Redis and a Redis Cluster alike: it compares every standing it changes with the one
its caller read (a compare-and-set: two tables' games scored at once never lose one another's
points), refuses a game already scored, writes, notes the game and announces the arena on its
channel. The keys live until ``keep`` seconds after the arena ends. The public arenas are listed
in ``bd:arenas`` (a sorted set by when each ends), pruned of those ended ``keep`` ago.
"""

from __future__ import annotations

import math
import time
from typing import Any

from blackdrez.server.stores.base import Arenas, arena_channel
from blackdrez.server.stores.keys import ARENAS_KEY, arena_keys
from blackdrez.server.stores.redis_link import RedisLink

UPDATE_SCRIPT = """
if ARGV[1] ~= '' and redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return -1
end
local n = tonumber(ARGV[4])
for i = 0, n - 1 do
  local player, had, old = ARGV[5 + 4 * i], ARGV[6 + 4 * i], ARGV[7 + 4 * i]
  local now = redis.call('HGET', KEYS[1], player)
  if had == '1' then
    if now ~= old then return 0 end
  elseif now then
    return 0
  end
end
for i = 0, n - 1 do
  redis.call('HSET', KEYS[1], ARGV[5 + 4 * i], ARGV[8 + 4 * i])
end
if ARGV[1] ~= '' then
  redis.call('SADD', KEYS[2], ARGV[1])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[2], ARGV[5 + 4 * n])
return 1
"""
"""Score a game or a join (KEYS: standings, games; ARGV: the game or '', the channel, the keys'
TTL, the number of players, then per player: id, '1' if they had a standing, that standing,
the new one; then the announcement): 1 written, 0 a standing changed meanwhile, -1 the game
was scored already."""


class RedisArenas(Arenas):
    """The arenas in ``bd:a:{A}:*`` and ``bd:arenas`` (see the module docstring)."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._redis: Any = link.redis
        self._update = link.script(UPDATE_SCRIPT)

    async def create(self, arena: str, info: bytes, ends: float, listed: bool, keep: float) -> None:
        now = time.time()
        ttl = max(1, math.ceil(ends + keep - now))
        info_key = arena_keys(arena)[0]
        with self._link.reaching():
            await self._redis.set(info_key, info, ex=ttl)
            if listed:
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.zadd(ARENAS_KEY, {arena: ends})
                    pipe.zremrangebyscore(ARENAS_KEY, "-inf", f"({now - keep}")
                    pipe.expire(ARENAS_KEY, ttl)
                    await pipe.execute()

    async def info(self, arena: str) -> bytes | None:
        with self._link.reaching():
            found: bytes | None = await self._redis.get(arena_keys(arena)[0])
        return found

    async def listed(self, since: float) -> list[bytes]:
        with self._link.reaching():
            ids = await self._redis.zrangebyscore(ARENAS_KEY, since, "+inf")
            found = [await self._redis.get(arena_keys(a.decode())[0]) for a in ids]
        return [info for info in found if info is not None]

    async def standings(self, arena: str) -> dict[str, bytes]:
        with self._link.reaching():
            found = await self._redis.hgetall(arena_keys(arena)[1])
        return {player.decode(): standing for player, standing in found.items()}

    async def update(
        self, arena: str, changes: dict[str, tuple[bytes | None, bytes]], game: str | None
    ) -> int:
        info_key, standings_key, games_key = arena_keys(arena)
        with self._link.reaching():
            ttl = await self._redis.ttl(info_key)
            args: list[Any] = [game or "", arena_channel(arena), max(ttl, 60), len(changes)]
            for player, (old, new) in changes.items():
                args += [player, "0" if old is None else "1", old or b"", new]
            args.append(arena.encode())
            written = await self._update(keys=[standings_key, games_key], args=args)
        return int(written)
