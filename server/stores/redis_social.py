"""Follows, blocks, players' whereabouts and challenges on Redis
(:class:`~blackdrez.server.stores.base.Social`).

Theory of operation
-------------------
Each player's keys carry their id as a hash tag (:mod:`blackdrez.server.stores.keys`): their
follows and blocks (hashes, id to name; a block removes the follow in the same transaction, one
slot), their status (a string with a TTL, written by the node of their connection). A challenge
is a string with a TTL, taken with ``GETDEL``'s equivalent in one transaction (``GET`` then
``DEL`` in ``MULTI``), so two answers to one challenge cannot both take it. Statuses of several
players are read in one pipeline (on a cluster, split by slot by redis-py).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from blackdrez.server.stores.base import Social
from blackdrez.server.stores.keys import block_key, challenge_key, follow_key, seen_key
from blackdrez.server.stores.redis_link import RedisLink


def _names(found: dict[bytes, bytes]) -> dict[str, str]:
    return {player.decode(): name.decode() for player, name in found.items()}


class RedisSocial(Social):
    """The social graph and whereabouts in ``bd:p:{P}:*`` and ``bd:ch:{C}``."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._redis: Any = link.redis

    async def follow(self, player: str, other: str, name: str) -> None:
        with self._link.reaching():
            await self._redis.hset(follow_key(player), other, name)

    async def unfollow(self, player: str, other: str) -> None:
        with self._link.reaching():
            await self._redis.hdel(follow_key(player), other)

    async def following(self, player: str) -> dict[str, str]:
        with self._link.reaching():
            return _names(await self._redis.hgetall(follow_key(player)))

    async def block(self, player: str, other: str, name: str) -> None:
        with self._link.reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hset(block_key(player), other, name)
                pipe.hdel(follow_key(player), other)
                await pipe.execute()

    async def unblock(self, player: str, other: str) -> None:
        with self._link.reaching():
            await self._redis.hdel(block_key(player), other)

    async def blocked(self, player: str) -> dict[str, str]:
        with self._link.reaching():
            return _names(await self._redis.hgetall(block_key(player)))

    async def seen(self, statuses: dict[str, bytes], ttl: float) -> None:
        if not statuses:
            return
        ms = max(1, math.ceil(ttl * 1000))
        with self._link.reaching():
            async with self._redis.pipeline(transaction=False) as pipe:
                for player, status in statuses.items():
                    pipe.set(seen_key(player), status, px=ms)
                await pipe.execute()

    async def gone(self, player: str) -> None:
        with self._link.reaching():
            await self._redis.delete(seen_key(player))

    async def statuses(self, players: Collection[str]) -> dict[str, bytes]:
        ordered = list(players)
        if not ordered:
            return {}
        with self._link.reaching():
            async with self._redis.pipeline(transaction=False) as pipe:
                for player in ordered:
                    pipe.get(seen_key(player))
                found = await pipe.execute()
        return {p: status for p, status in zip(ordered, found, strict=True) if status is not None}

    async def put_challenge(self, challenge: str, data: bytes, ttl: float) -> None:
        with self._link.reaching():
            await self._redis.set(challenge_key(challenge), data, px=max(1, math.ceil(ttl * 1000)))

    async def take_challenge(self, challenge: str) -> bytes | None:
        key = challenge_key(challenge)
        with self._link.reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.get(key)
                pipe.delete(key)
                found, _ = await pipe.execute()
        taken: bytes | None = found
        return taken
