"""The matchmaking queue on Redis (:class:`~blackdrez.server.stores.base.Matchmaking`).

Theory of operation
-------------------
Every key carries the hash tag ``{mm}`` (:mod:`blackdrez.server.stores.keys`), so each step is
one script on one slot, on a single Redis and on a Redis Cluster alike: the tickets (a hash,
player to ticket) and their expiries (a sorted set, scored by the wall-clock second each
expires), the matcher's lease (``node/incarnation/token``, with a TTL) and the counter its
tokens come from. :meth:`RedisMatchmaking.place` checks the lease, checks that every player of
the table is still queued, removes them and publishes the table on
:data:`~blackdrez.server.stores.base.MATCH_CHANNEL` in one script: a matcher that lost its lease
(paused past it, say) places nobody, and a player who cancelled meanwhile is never placed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from blackdrez.server.stores.base import MATCH_CHANNEL, LeaseLost, Matchmaking
from blackdrez.server.stores.keys import (
    MATCH_EPOCH_KEY,
    MATCH_EXPIRES_KEY,
    MATCH_KEY_TTL,
    MATCH_LEAD_KEY,
    MATCH_TICKETS_KEY,
)
from blackdrez.server.stores.redis_link import RedisLink

KEYS = [MATCH_TICKETS_KEY, MATCH_EXPIRES_KEY]

ENTER_SCRIPT = """
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
"""
"""Queue a ticket (KEYS: tickets, expiries; ARGV: player, ticket, expiry, the keys' TTL)."""

WAITING_SCRIPT = """
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
for _, player in ipairs(gone) do
  redis.call('HDEL', KEYS[1], player)
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
return redis.call('HVALS', KEYS[1])
"""
"""Every ticket not expired (KEYS: tickets, expiries; ARGV: now), the expired dropped."""

LEAD_SCRIPT = """
local held = redis.call('GET', KEYS[1])
if held and ARGV[3] ~= '' and held == ARGV[1] .. ARGV[3] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(ARGV[3])
end
if held then
  return false
end
local token = redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('SET', KEYS[1], ARGV[1] .. token, 'PX', ARGV[2])
return token
"""
"""The matcher's lease (KEYS: lease, epoch; ARGV: ``node/incarnation/``, TTL in ms, the token
this process holds or '', the epoch's TTL): the token, or nil while another holds it."""

PLACE_SCRIPT = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then
  return -1
end
for i = 4, #ARGV do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then
    return 0
  end
end
for i = 4, #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
"""
"""Place a table's players (KEYS: tickets, expiries, lease; ARGV: the lease's value, the
channel, the announcement, the players): 1 placed, 0 someone is not queued (nothing changed),
-1 the lease is not held. The channel is an argument, not a key: a cluster routes the script by
its keys' slot, and its ``PUBLISH`` reaches every node."""


class RedisMatchmaking(Matchmaking):
    """The queue in ``bd:{mm}:*`` (see the module docstring)."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._redis: Any = link.redis
        self._enter = link.script(ENTER_SCRIPT)
        self._waiting = link.script(WAITING_SCRIPT)
        self._lead = link.script(LEAD_SCRIPT)
        self._place = link.script(PLACE_SCRIPT)
        self._token: int | None = None

    async def enter(self, player: str, ticket: bytes, expires: float) -> None:
        with self._link.reaching():
            await self._enter(keys=KEYS, args=[player, ticket, repr(expires), MATCH_KEY_TTL])

    async def ticket(self, player: str, now: float) -> bytes | None:
        with self._link.reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hget(MATCH_TICKETS_KEY, player)
                pipe.zscore(MATCH_EXPIRES_KEY, player)
                ticket, expires = await pipe.execute()
        if ticket is None or expires is None or float(expires) < now:
            return None
        found: bytes = ticket
        return found

    async def leave(self, player: str) -> None:
        with self._link.reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hdel(MATCH_TICKETS_KEY, player)
                pipe.zrem(MATCH_EXPIRES_KEY, player)
                await pipe.execute()

    async def refresh(self, players: Collection[str], expires: float) -> None:
        if not players:
            return
        with self._link.reaching():
            await self._redis.zadd(MATCH_EXPIRES_KEY, dict.fromkeys(players, expires), xx=True)

    async def waiting(self, now: float) -> list[bytes]:
        with self._link.reaching():
            found: list[bytes] = await self._waiting(keys=KEYS, args=[repr(now)])
        return found

    async def lead(self, ttl: float) -> int | None:
        prefix = self._link.holder(0)[:-1]  # "node/incarnation/"
        mine = "" if self._token is None else str(self._token)
        args: list[Any] = [prefix, max(1, round(ttl * 1000)), mine, MATCH_KEY_TTL]
        with self._link.reaching():
            token = await self._lead(keys=[MATCH_LEAD_KEY, MATCH_EPOCH_KEY], args=args)
        if token is None:
            return None
        self._token = int(token)
        return self._token

    async def place(self, token: int, players: Sequence[str], found: bytes) -> bool:
        args: list[Any] = [self._link.holder(token), MATCH_CHANNEL, found, *players]
        with self._link.reaching():
            placed = await self._place(keys=[*KEYS, MATCH_LEAD_KEY], args=args)
        if placed < 0:
            raise LeaseLost("matchmaking: this process does not lead the queue")
        return bool(placed)
