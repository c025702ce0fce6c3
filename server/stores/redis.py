"""The Redis stores: one lobby shared by any number of server nodes.

Theory of operation
-------------------
:func:`redis_stores` builds the bundle of :mod:`blackdrez.server.stores.base` on one Redis: every
concern's store runs its commands on one :class:`~blackdrez.server.stores.redis_link.RedisLink`
(one client, one health; failing fast), with its keys as :mod:`blackdrez.server.stores.keys`
lists them. The leases and the logs, with their group commit, are in
:mod:`blackdrez.server.stores.redis_tables`; the bus in :mod:`blackdrez.server.stores.redis_bus`;
the smaller concerns here. On a Redis Cluster the same classes run, a few of them specialised
(:mod:`blackdrez.server.stores.redis_cluster`).

Presence and leaderboards run as Lua scripts: presence reads Redis's clock so nodes need no
synchronised clocks, and a leaderboard entry is compared and replaced atomically. Equal scores
rank by who reached them first: a member starts with ``999999999999999 - seq``, zero-padded, so
``ZREVRANGE`` (equal scores in reverse lexicographic order) puts the earlier entry first. The
shared rate limits' token buckets are timed by Redis's own clock too, and run on a connection of
their own (a handshake's: redis-py's call cost 0.2 ms).
"""

from __future__ import annotations

import math
from typing import Any

import redis.exceptions

from blackdrez.server.stores.base import (
    REPORTS_KEPT,
    DailyDeals,
    Leaderboards,
    LeaseLost,
    Lobby,
    Players,
    Presence,
    Reports,
    StoreRefused,
    Stores,
    Tokens,
)
from blackdrez.server.stores.keys import (
    ATTACHES_KEY,
    INCARNATIONS_KEY,
    LOBBY_KEY,
    NODES_KEY,
    PLAYER_TABLES_TTL,
    REPORTS_KEY,
    SECRET_KEY,
    daily_claim_keys,
    daily_key,
    kept_record_key,
    latest_attach_key,
    leaderboard_keys,
    lease_key,
    limit_key,
    player_tables_key,
    revoked_key,
    table_key,
)
from blackdrez.server.stores.redis_arenas import RedisArenas
from blackdrez.server.stores.redis_bus import RedisBus
from blackdrez.server.stores.redis_link import COMMAND_TIMEOUT, RedisLink
from blackdrez.server.stores.redis_matchmaking import RedisMatchmaking
from blackdrez.server.stores.redis_social import RedisSocial
from blackdrez.server.stores.redis_tables import RedisLeases, RedisTableLogs, hosted_tables

READ_CHUNK = 1000
"""Keys read in one pipeline at most by a read of many players' keys (after a bus outage)."""

PUT_RECORD_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[2], 'node', ARGV[2], 'record', ARGV[3], 'listed', ARGV[4])
return 1
"""
"""Replaces a table's lobby record (KEYS: lease, record; ARGV: holder, node, record, listed
flag) while the lease is held: 1 written, 0 not."""
LATEST_ATTACH_SCRIPT = """
local latest = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > latest then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
"""
"""Keeps the greatest order given to a player's connections (KEYS: the player's key; ARGV: the
order, the TTL in ms): two hellos at once may note theirs in either order."""
TAKE_TOKEN_SCRIPT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(saved[1]), tonumber(saved[2])
if tokens == nil or at == nil then
  tokens, at = burst, now_ms
end
tokens = math.min(burst, tokens + math.max(0, now_ms - at) * rate / 1000)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'at', now_ms)
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((burst - tokens) * 1000 / rate)))
return wait
"""
"""A token bucket shared by every node (KEYS: the bucket; ARGV: rate a second, burst): spend a
token if there is one and return 0, else the milliseconds until there is. Timed by Redis's own
clock, so nodes whose clocks differ share one bucket; the key lives until it would be full."""
CLAIM_DAILY_SCRIPT = """
local first
if redis.call('SADD', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  first = ARGV[2]
else
  first = redis.call('HGET', KEYS[2], ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return first
"""
"""Claims a daily deal for a player (KEYS: the deal's players set and ranked hash; ARGV: the
player, the table of the session, how long to keep the claims in ms): the table of the player's
ranked session of the deal, this one if the player is new to it (``nil``: an older version's
claim named none). The set is the claim older versions make too (a rolling upgrade)."""


HEARTBEAT_SCRIPT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local expiry = ms + tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
redis.call('ZADD', KEYS[1], expiry, ARGV[1])
local beats = redis.call('HGETALL', KEYS[2])
for i = 1, #beats, 2 do
  local until_ms = tonumber(string.match(beats[i + 1], '^(%d+)/'))
  if not until_ms or until_ms <= ms then redis.call('HDEL', KEYS[2], beats[i]) end
end
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d', expiry) .. '/' .. ARGV[3])
"""

LIVE_INCARNATIONS_SCRIPT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', ms), '+inf')
local found = {}
for _, node in ipairs(live) do
  local beat = redis.call('HGET', KEYS[2], node)
  local incarnation = ''
  if beat then
    local until_ms, named = string.match(beat, '^(%d+)/(.*)$')
    if until_ms and tonumber(until_ms) > ms then incarnation = named end
  end
  table.insert(found, node)
  table.insert(found, incarnation)
end
return found
"""
"""Each live node and its incarnation ('' if none is known: a node of an older version, or one
whose last heartbeat with an incarnation has lapsed while it beats without, a rollback)."""

SUBMIT_SCORE_SCRIPT = """
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old then
  local best = tonumber(redis.call('ZSCORE', KEYS[1], old))
  if best and tonumber(ARGV[3]) <= best then
    if redis.call('HGET', KEYS[3], ARGV[1]) == ARGV[2] then return 1 end
    return 0
  end
  redis.call('ZREM', KEYS[1], old)
end
local seq = redis.call('INCR', KEYS[4])
local member = string.format('%015d', 999999999999999 - seq) .. ':' .. ARGV[1]
redis.call('ZADD', KEYS[1], ARGV[3], member)
redis.call('HSET', KEYS[2], ARGV[1], member)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return 1
"""

TOP_SCORES_SCRIPT = """
local ranked = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local out = {}
for i = 1, #ranked, 2 do
  local player = string.sub(ranked[i], 17)
  out[#out + 1] = player
  out[#out + 1] = redis.call('HGET', KEYS[3], player) or ''
  out[#out + 1] = ranked[i + 1]
end
return out
"""


class RedisLobby(Lobby):
    """Each table's record (``bd:t:{T}:record``) and the set of listed tables."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._redis: Any = link.redis
        self._put_record = link.script(PUT_RECORD_SCRIPT)

    async def put(
        self, table_id: str, node_id: str, record: bytes, listed: bool, token: int | None = None
    ) -> None:
        flag = "1" if listed else "0"
        with self._link.reaching():
            if token is None:
                fields = {"node": node_id, "record": record, "listed": flag}
                await self._redis.hset(table_key(table_id), mapping=fields)
            else:
                written = await self._put_record(
                    keys=[lease_key(table_id), table_key(table_id)],
                    args=[self._link.holder(token), node_id, record, flag],
                )
                if not written:
                    raise LeaseLost(table_id)
            # The lobby set lives in another slot: a second step (listings drop stale ids).
            if listed:
                await self._redis.sadd(LOBBY_KEY, table_id)
            else:
                await self._redis.srem(LOBBY_KEY, table_id)

    async def get(self, table_id: str) -> tuple[str, bytes] | None:
        with self._link.reaching():
            node, record = await self._redis.hmget(table_key(table_id), ["node", "record"])
        if node is None or record is None:
            return None
        return node.decode(), record

    async def remove(self, table_id: str) -> None:
        # The lobby set lives in another slot: not one transaction (listings drop stale ids).
        with self._link.reaching():
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.delete(table_key(table_id))
                pipe.srem(LOBBY_KEY, table_id)
                await pipe.execute()

    async def all(self) -> list[tuple[str, str, bytes]]:
        with self._link.reaching():
            table_ids = sorted(await hosted_tables(self._redis, None))
            async with self._redis.pipeline(transaction=False) as pipe:
                for table_id in table_ids:
                    pipe.hmget(table_key(table_id), ["node", "record"])
                found = await pipe.execute() if table_ids else []
        return [
            (table_id, node.decode(), record)
            for table_id, (node, record) in zip(table_ids, found, strict=True)
            if node is not None and record is not None
        ]

    async def listed(self) -> list[bytes]:
        with self._link.reaching():
            table_ids = sorted(raw.decode() for raw in await self._redis.smembers(LOBBY_KEY))
            if not table_ids:
                return []
            async with self._redis.pipeline(transaction=False) as pipe:
                for table_id in table_ids:
                    pipe.hget(table_key(table_id), "record")
                records = await pipe.execute()
            vanished = [
                tid for tid, record in zip(table_ids, records, strict=True) if record is None
            ]
            if vanished:
                await self._redis.srem(LOBBY_KEY, *vanished)
        return [record for record in records if record is not None]


class RedisPlayers(Players):
    """Each player's table set and latest connection order, and the counter of orders."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._redis: Any = link.redis
        self._latest_attach = link.script(LATEST_ATTACH_SCRIPT)

    async def add_table(self, player: str, table_id: str) -> None:
        with self._link.reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.sadd(player_tables_key(player), table_id)
                pipe.expire(player_tables_key(player), PLAYER_TABLES_TTL)
                await pipe.execute()

    async def remove_table(self, player: str, table_id: str) -> None:
        with self._link.reaching():
            await self._redis.srem(player_tables_key(player), table_id)

    async def tables(self, player: str) -> list[str]:
        with self._link.reaching():
            members = await self._redis.smembers(player_tables_key(player))
        return sorted(member.decode() for member in members)

    async def next_attach(self, player: str) -> int:
        with self._link.reaching():
            order = int(await self._redis.incr(ATTACHES_KEY))
            await self._latest_attach(
                keys=[latest_attach_key(player)], args=[order, PLAYER_TABLES_TTL * 1000]
            )
        return order

    async def latest_attaches(self, players: list[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        with self._link.reaching():
            for start in range(0, len(players), READ_CHUNK):
                group = players[start : start + READ_CHUNK]
                async with self._redis.pipeline(transaction=False) as pipe:
                    for player in group:
                        pipe.get(latest_attach_key(player))
                    orders = await pipe.execute()
                found |= {p: int(o) for p, o in zip(group, orders, strict=True) if o is not None}
        return found


class RedisPresence(Presence):
    """Heartbeats timed by Redis's clock (``bd:nodes`` and ``{bd:nodes}:incarnations``)."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._heartbeat = link.script(HEARTBEAT_SCRIPT)
        self._live_incarnations = link.script(LIVE_INCARNATIONS_SCRIPT)

    async def heartbeat(self, ttl: float) -> None:
        with self._link.reaching():
            await self._heartbeat(
                keys=[NODES_KEY, INCARNATIONS_KEY],
                args=[self._link.node_id, round(ttl * 1000), self._link.incarnation],
            )

    async def live_incarnations(self) -> dict[str, str | None]:
        with self._link.reaching():
            found = await self._live_incarnations(keys=[NODES_KEY, INCARNATIONS_KEY])
        return {
            node.decode(): incarnation.decode() or None
            for node, incarnation in zip(found[::2], found[1::2], strict=True)
        }


class RedisLeaderboards(Leaderboards):
    """The boards (``bd:lb:{B}...``) and the records of ranked games (``bd:rec:{G}``)."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._redis: Any = link.redis
        self._submit_score = link.script(SUBMIT_SCORE_SCRIPT)
        self._top_scores = link.script(TOP_SCORES_SCRIPT)

    async def submit(self, board: str, player: str, entry: bytes, score: int) -> bool:
        with self._link.reaching():
            placed = await self._submit_score(
                keys=leaderboard_keys(board), args=[player, entry, score]
            )
        return bool(placed)

    async def top(self, board: str, limit: int) -> list[tuple[str, bytes, int]]:
        if limit <= 0:
            return []
        with self._link.reaching():
            flat = await self._top_scores(keys=leaderboard_keys(board), args=[limit])
        return [
            (flat[i].decode(), bytes(flat[i + 1]), int(float(flat[i + 2])))
            for i in range(0, len(flat), 3)
        ]

    async def keep_record(self, game_id: str, data: bytes, ttl: float | None = None) -> None:
        with self._link.reaching():
            expiry = None if ttl is None else max(1, int(ttl * 1000))
            await self._redis.set(kept_record_key(game_id), data, px=expiry)

    async def kept_record(self, game_id: str) -> bytes | None:
        with self._link.reaching():
            data = await self._redis.get(kept_record_key(game_id))
        return None if data is None else bytes(data)


class RedisDailyDeals(DailyDeals):
    """Each deal's seed (``bd:daily:{D}``) and claims (``:players``, ``:ranked``)."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._redis: Any = link.redis
        self._claim = link.script(CLAIM_DAILY_SCRIPT)

    async def seed(self, game: str, day: str, candidate: str | None) -> str | None:
        key = daily_key(game, day)
        with self._link.reaching():
            if candidate is None:
                kept = await self._redis.get(key)
                return None if kept is None else kept.decode()
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(key, candidate, nx=True)
                pipe.get(key)
                _, seed = await pipe.execute()
        return seed.decode()

    async def claim(self, game: str, day: str, player: str, table: str, keep: float) -> str | None:
        with self._link.reaching():
            ranked = await self._claim(
                keys=daily_claim_keys(game, day), args=[player, table, max(1, int(keep * 1000))]
            )
        return None if ranked is None else ranked.decode()

    async def table(self, game: str, day: str, player: str) -> str | None:
        with self._link.reaching():
            ranked = await self._redis.hget(daily_claim_keys(game, day)[1], player)
        return None if ranked is None else ranked.decode()


class RedisTokens(Tokens):
    """The signing secret, revoked tokens, and the token buckets shared by every node."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._redis: Any = link.redis
        self._take_token = link.script(TAKE_TOKEN_SCRIPT)
        self._limit_link = link.commit_link(TAKE_TOKEN_SCRIPT)

    async def close(self) -> None:
        """Close the rate limits' own connection."""
        if self._limit_link is not None:
            self._limit_link.close()

    async def shared_secret(self, proposed: bytes) -> bytes:
        return (await self._offer_secret(proposed))[1]

    async def restore_secret(self, secret: bytes) -> bytes | None:
        return (await self._offer_secret(secret))[0]

    async def _offer_secret(self, secret: bytes) -> tuple[bytes | None, bytes]:
        """Write ``secret`` unless one is stored, in one transaction: the secret stored before
        (``None``: none) and the one stored now."""
        try:
            with self._link.reaching():
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.get(SECRET_KEY)
                    pipe.set(SECRET_KEY, secret, nx=True)
                    pipe.get(SECRET_KEY)
                    before, _, now = await pipe.execute()
        except redis.exceptions.ResponseError as error:  # an error reply, not a lost link
            raise StoreRefused(str(error)) from error
        return before, now

    async def revoke(self, token_id: str, ttl: float) -> None:
        """``bd:revoked:{TOKEN}`` (string), expiring with the token itself."""
        with self._link.reaching():
            await self._redis.set(revoked_key(token_id), b"1", px=max(1, round(ttl * 1000)))

    async def revoked(self, token_id: str) -> bool:
        with self._link.reaching():
            return bool(await self._redis.exists(revoked_key(token_id)))

    async def take(self, kind: str, key: str, rate: float, burst: int) -> float:
        keys = [limit_key(kind, key)]
        args: list[Any] = [repr(float(rate)), int(burst)]
        with self._link.reaching():
            if self._limit_link is not None:  # (a handshake's: redis-py's call cost 0.2 ms)
                wait_ms = await self._limit_link.call(keys, args)
            else:
                wait_ms = await self._take_token(keys=keys, args=args)
        return int(wait_ms) / 1000


class RedisReports(Reports):
    """The reports filed (``bd:reports``, a sorted set by when each was filed)."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._redis: Any = link.redis

    async def add(self, report: bytes, at: float, keep: float) -> None:
        with self._link.reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.zadd(REPORTS_KEY, {report: at})
                pipe.zremrangebyscore(REPORTS_KEY, "-inf", f"({at - keep}")
                pipe.zremrangebyrank(REPORTS_KEY, 0, -REPORTS_KEPT - 1)
                pipe.expire(REPORTS_KEY, max(1, math.ceil(keep)))
                await pipe.execute()

    async def recent(self, limit: int) -> list[bytes]:
        with self._link.reaching():
            found: list[bytes] = await self._redis.zrevrange(REPORTS_KEY, 0, limit - 1)
        return found


def redis_stores(
    url: str,
    node_id: str,
    *,
    incarnation: str | None = None,
    wait_replicas: int = 0,
    wait_timeout_ms: int = 100,
) -> Stores:
    """Every concern's store on the Redis at ``url``, for node ``node_id``. With
    ``wait_replicas``, a log append returns once that many replicas hold it (waiting at most
    ``wait_timeout_ms``): see :mod:`blackdrez.server.stores.redis_tables`."""
    check_wait(wait_replicas, wait_timeout_ms)
    link = RedisLink(url, node_id, incarnation)
    lobby, bus = RedisLobby(link), RedisBus(link)
    logs = RedisTableLogs(
        link, lobby, bus, wait_replicas=wait_replicas, wait_timeout_ms=wait_timeout_ms
    )
    return redis_bundle(link, lobby, bus, RedisLeases(link), logs)


def redis_bundle(
    link: RedisLink, lobby: RedisLobby, bus: RedisBus, leases: RedisLeases, logs: RedisTableLogs
) -> Stores:
    """The bundle of a Redis deployment: the concerns a single Redis and a cluster keep alike,
    around the link, bus, leases and logs of its kind."""
    return Stores(
        link=link,
        lobby=lobby,
        players=RedisPlayers(link),
        presence=RedisPresence(link),
        leases=leases,
        logs=logs,
        leaderboards=RedisLeaderboards(link),
        daily=RedisDailyDeals(link),
        tokens=RedisTokens(link),
        bus=bus,
        reports=RedisReports(link),
        matchmaking=RedisMatchmaking(link),
        arenas=RedisArenas(link),
        social=RedisSocial(link),
    )


def check_wait(wait_replicas: int, wait_timeout_ms: int) -> None:
    """Raise :class:`ValueError` unless the replicas and timeout of a durable append make
    sense (a timeout within the command timeout)."""
    if wait_replicas < 0 or not 0 < wait_timeout_ms < COMMAND_TIMEOUT * 1000:
        raise ValueError(
            "wait_replicas must be 0 or more and wait_timeout_ms between 1 and "
            f"{int(COMMAND_TIMEOUT * 1000) - 1}"
        )
