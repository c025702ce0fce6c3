"""The Redis store: one lobby shared by any number of server nodes.

Theory of operation
-------------------
Key layout. Every key of one table, player or game carries its id as a Redis Cluster hash tag, so
a multi-key write about one of them stays in one slot. Each key has an owner (who writes it) and a
lifetime (when it goes); ``retention`` is the node's ``--record-retention`` (default one day)::

    key                    type    owner              lifetime
    bd:t:{T}:lease         string  the table's host   TTL = lease TTL, renewed by its holder;
                                                      deleted when the table is retired
    bd:t:{T}:epoch         string  lease acquisitions the table's life; TTL = retention once retired
    bd:t:{T}:log           stream  the table's host   the table's life; deleted when retired
    bd:t:{T}:record        hash    the table's host   the table's life; deleted when retired
    bd:t:{T}:state         string  the retiring host  set ("closed") at retirement, TTL = retention
    bd:t:{T}:game          string  the retiring host  set at retirement, TTL = retention
    bd:p:{P}:tables        set     the tables' hosts  TTL PLAYER_TABLES_TTL, renewed by each add;
                                                      members removed when the seat is freed or
                                                      the table retired (empty: gone)
    bd:secret              string  every node         fixed (no TTL): the token-signing secret
    bd:revoked:{ID}        string  the node a player  TTL = the token's remaining lifetime: a
                           logged out on      token ended by ``logout``
    bd:nodes               zset    every node         fixed; a member expires by its score
    bd:hosted              set     tables' hosts      fixed; a member leaves when its table is
                                                      retired (or is found gone by a scan)
    bd:lobby:tables        set     tables' hosts      fixed; a member leaves when its table is
                                                      retired (or is found gone by a listing)
    bd:lb:{G}, bd:lb:{G}:entries, bd:lb:{G}:names, bd:lb:{G}:seq
                           zset, hash, hash, string   fixed: the leaderboards (one entry per
                                                      player and game)

The fixed keys above are the only ones that may exist without a TTL, besides a live table's
epoch, log and record (owned by its host, deleted or given a TTL when it is retired; a table whose
host died is adopted by another node, so its keys always have an owner). Field details:
``record`` holds node, record, listed ("1" / "0"); ``lease`` holds ``node/incarnation/token``;
``log`` entries have the field ``e`` and the ID ``<position>-0``, position 1 being the create
command; ``game`` is the table's compact game record (``server.hosting.TableRecord``).

Writes that touch several keys of one slot run in one Lua script (every fenced write: see
"Hosting and fencing" in :mod:`server.stores.base`) or one MULTI/EXEC transaction, so a lost
connection changes all or nothing. The sets ``bd:lobby:tables`` and ``bd:hosted`` live in other
slots than a table's keys: they are updated in a second step, and every reader tolerates and
removes ids whose table is gone (:meth:`RedisStore.list_tables`,
:meth:`RedisStore.adoptable_tables`).

Presence and leaderboards run as Lua scripts: presence reads Redis's clock so nodes need no
synchronised clocks, and a leaderboard entry is compared and replaced atomically. Equal scores
rank by who reached them first: a member starts with ``999999999999999 - seq``, zero-padded, so
``ZREVRANGE`` (equal scores in reverse lexicographic order) puts the earlier entry first.

The bus uses one pub/sub connection per store, read by one background task that hands each
message to the channel's handlers with ``loop.call_soon`` (the same as the in-memory store).
When the connection drops the task reconnects on the retry policy's backoff (woken at once when
the store's health sees Redis back) and subscribes every channel that still has handlers;
messages published while it was down are lost, as Redis pub/sub never keeps them. Commands fail
fast (short socket timeouts, no retries) and raise :class:`StoreUnavailable`, so the caller can
answer ``unavailable`` at once; every outcome is reported to the store's health, and the
connection pool reconnects on the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Iterator

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from server.retry import Backoff
from server.stores.base import (
    Handler,
    LeaseLost,
    Location,
    Store,
    StoreUnavailable,
    Whereabouts,
    holder_value,
)

log = logging.getLogger(__name__)

UNREACHABLE = (
    redis.exceptions.ConnectionError,  # includes "no connection available" from a full pool
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    TimeoutError,
    OSError,
)
"""What a lost, refused or stalled connection raises (or a replica refusing writes mid-failover)."""

POOL_SIZE = 64
"""Connections to Redis per node, beside the pub/sub one."""
CONNECT_TIMEOUT = 1.0
COMMAND_TIMEOUT = 2.0
SUBSCRIBE_TIMEOUT = 2.0
"""How long :meth:`RedisStore.subscribe` waits for the connection and for Redis's confirmation."""
KEEPALIVE = 5.0
"""Idle seconds before the pub/sub reader pings; no reply by the next idle period is a dead link."""
PROBE_TIMEOUT = 0.5
"""How long a health probe (PING) waits: a frozen Redis must not hold the probe for long."""
PUBSUB_BACKOFF = Backoff(first=0.1, cap=2.0)
"""Between attempts to reconnect the pub/sub link (woken early when Redis is seen back)."""
PLAYER_TABLES_TTL = 7 * 24 * 3600
"""Seconds a player's table set lives after its last addition (its tables close long before)."""

CLOSED, UNKNOWN = Whereabouts.CLOSED, Whereabouts.UNKNOWN
FIXED_KEYS: tuple[str, ...] = ("bd:secret", "bd:nodes", "bd:hosted", "bd:lobby:tables", "bd:lb:*")
"""Patterns (``fnmatch``) of the only keys that may live without a TTL (see the key table)."""
HOSTED_KEY = "bd:hosted"
SECRET_KEY = "bd:secret"
LOBBY_KEY = "bd:lobby:tables"
NODES_KEY = "bd:nodes"


def lease_key(table_id: str) -> str:
    """The key whose value names the node hosting a table."""
    return f"bd:t:{{{table_id}}}:lease"


def log_key(table_id: str) -> str:
    """The stream of a table's commands."""
    return f"bd:t:{{{table_id}}}:log"


def epoch_key(table_id: str) -> str:
    """The counter of a table's lease acquisitions: the fencing tokens."""
    return f"bd:t:{{{table_id}}}:epoch"


def state_key(table_id: str) -> str:
    """Set when a table is retired: it can never be leased again."""
    return f"bd:t:{{{table_id}}}:state"


def game_key(table_id: str) -> str:
    """A retired table's compact game record."""
    return f"bd:t:{{{table_id}}}:game"


ACQUIRE_SCRIPT = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local holder = redis.call('GET', KEYS[1])
if holder then
  local node, incarnation = string.match(holder, '^(.*)/([^/]*)/[^/]*$')
  if node ~= ARGV[1] or incarnation >= ARGV[2] then return 0 end
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '/' .. ARGV[2] .. '/' .. epoch, 'PX', ARGV[3])
return epoch
"""

RENEW_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

APPEND_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local expected = tonumber(ARGV[2]) - 1
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if expected == 0 then
  if #last ~= 0 then return -1 end
elseif #last == 0 or last[1][1] ~= expected .. '-0' then
  return -1
end
redis.call('XADD', KEYS[2], ARGV[2] .. '-0', 'e', ARGV[3])
if ARGV[4] ~= '' then
  redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return 1
"""

PUT_RECORD_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[2], 'node', ARGV[2], 'record', ARGV[3], 'listed', ARGV[4])
return 1
"""

RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

RETIRE_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5])
redis.call('SET', KEYS[3], 'closed', 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('SET', KEYS[6], ARGV[3], 'PX', ARGV[2])
return 1
"""

LOCATE_SCRIPT = """
if redis.call('EXISTS', KEYS[2]) == 1 then return {'closed'} end
local holder = redis.call('GET', KEYS[1])
if holder then return {'hosted', holder} end
if redis.call('EXISTS', KEYS[3]) == 1 or redis.call('EXISTS', KEYS[4]) == 1 then
  return {'moving'}
end
return {'unknown'}
"""


def table_key(table_id: str) -> str:
    """The hash holding a table's hosting node, record and listed flag."""
    return f"bd:t:{{{table_id}}}:record"


def player_tables_key(player: str) -> str:
    """The set of tables where a player holds a seat."""
    return f"bd:p:{{{player}}}:tables"


def leaderboard_keys(game: str) -> list[str]:
    """The board, entries, names and counter keys of one game's leaderboard."""
    board = f"bd:lb:{{{game}}}"
    return [board, f"{board}:entries", f"{board}:names", f"{board}:seq"]


HEARTBEAT_SCRIPT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[1])
"""

LIVE_NODES_SCRIPT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', ms), '+inf')
"""

SUBMIT_SCORE_SCRIPT = """
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old then
  local best = tonumber(redis.call('ZSCORE', KEYS[1], old))
  if best and tonumber(ARGV[3]) <= best then return 0 end
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


class RedisStore(Store):
    """The lobby, presence, leaderboards and bus in Redis (see the module docstring)."""

    shared = True

    def __init__(self, url: str, node_id: str) -> None:
        super().__init__(node_id)
        # A bounded pool that makes a burst of commands wait for a connection (for at most
        # COMMAND_TIMEOUT) instead of failing with "too many connections".
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=POOL_SIZE,
            timeout=COMMAND_TIMEOUT,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=COMMAND_TIMEOUT,
        )
        self._redis = aioredis.Redis(connection_pool=pool, retry=Retry(NoBackoff(), 0))
        self._heartbeat = self._redis.register_script(HEARTBEAT_SCRIPT)
        self._live_nodes = self._redis.register_script(LIVE_NODES_SCRIPT)
        self._submit_score = self._redis.register_script(SUBMIT_SCORE_SCRIPT)
        self._top_scores = self._redis.register_script(TOP_SCORES_SCRIPT)
        self._acquire = self._redis.register_script(ACQUIRE_SCRIPT)
        self._renew = self._redis.register_script(RENEW_SCRIPT)
        self._append = self._redis.register_script(APPEND_SCRIPT)
        self._put_record = self._redis.register_script(PUT_RECORD_SCRIPT)
        self._release = self._redis.register_script(RELEASE_SCRIPT)
        self._retire = self._redis.register_script(RETIRE_SCRIPT)
        self._locate = self._redis.register_script(LOCATE_SCRIPT)
        self._pubsub: PubSub = self._redis.pubsub()
        self._handlers: dict[str, list[Handler]] = {}
        self._confirmations: dict[str, asyncio.Future[None]] = {}
        self._subscriptions = asyncio.Lock()
        self._online = asyncio.Event()
        self._retry_now = asyncio.Event()
        self._attempt_failed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self.health.listeners.append(self._retry_now.set)

    @contextlib.contextmanager
    def _reaching(self) -> Iterator[None]:
        """Turn a lost or refused Redis connection into :class:`StoreUnavailable`, and tell the
        store's health how the call went."""
        try:
            yield
        except UNREACHABLE as error:
            self.health.failed(error)
            raise StoreUnavailable(f"redis: {error}") from error
        self.health.succeeded()

    async def ping(self) -> None:
        with self._reaching():
            async with asyncio.timeout(PROBE_TIMEOUT):
                await self._redis.ping()

    async def start(self) -> None:
        """Start the pub/sub reader; Redis need not be up yet (it connects when it can)."""
        if self._reader is None:
            self._reader = asyncio.create_task(self._read_forever(), name="redis-store-pubsub")

    async def close(self) -> None:
        """Stop the pub/sub reader and close every connection."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        self.health.close()
        self._online.clear()
        self._handlers.clear()
        with contextlib.suppress(*UNREACHABLE):
            await self._pubsub.aclose()
        with contextlib.suppress(*UNREACHABLE):
            await self._redis.aclose()

    # ------------------------------------------------------------------ secrets
    async def shared_secret(self, proposed: bytes) -> bytes:
        with self._reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(SECRET_KEY, proposed, nx=True)
                pipe.get(SECRET_KEY)
                _, secret = await pipe.execute()
        return secret

    # ------------------------------------------------------------------ lobby records
    async def put_table(
        self, table_id: str, node_id: str, record: bytes, listed: bool, token: int | None = None
    ) -> None:
        flag = "1" if listed else "0"
        with self._reaching():
            if token is None:
                fields = {"node": node_id, "record": record, "listed": flag}
                await self._redis.hset(table_key(table_id), mapping=fields)
            else:
                written = await self._put_record(
                    keys=[lease_key(table_id), table_key(table_id)],
                    args=[self._holder(token), node_id, record, flag],
                )
                if not written:
                    raise LeaseLost(table_id)
            # The lobby set lives in another slot: a second step (listings drop stale ids).
            if listed:
                await self._redis.sadd(LOBBY_KEY, table_id)
            else:
                await self._redis.srem(LOBBY_KEY, table_id)

    async def get_table(self, table_id: str) -> tuple[str, bytes] | None:
        with self._reaching():
            node, record = await self._redis.hmget(table_key(table_id), ["node", "record"])
        if node is None or record is None:
            return None
        return node.decode(), record

    async def remove_table(self, table_id: str) -> None:
        with self._reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(table_key(table_id))
                pipe.srem(LOBBY_KEY, table_id)
                await pipe.execute()

    async def list_tables(self) -> list[bytes]:
        with self._reaching():
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

    # ------------------------------------------------------------------ hosting
    def _holder(self, token: int) -> str:
        return holder_value(self.node_id, self.incarnation, token)

    async def acquire_lease(self, table_id: str, ttl: float) -> int | None:
        with self._reaching():
            token = await self._acquire(
                keys=[lease_key(table_id), epoch_key(table_id), state_key(table_id)],
                args=[self.node_id, self.incarnation, int(ttl * 1000)],
            )
            if token:
                await self._redis.sadd(HOSTED_KEY, table_id)
        return int(token) or None

    async def renew_leases(self, leases: dict[str, int], ttl: float) -> set[str]:
        if not leases:
            return set()
        tables = list(leases)
        with self._reaching():
            async with self._redis.pipeline(transaction=False) as pipe:
                for table_id in tables:
                    await self._renew(
                        keys=[lease_key(table_id)],
                        args=[self._holder(leases[table_id]), int(ttl * 1000)],
                        client=pipe,
                    )
                held = await pipe.execute()
        return {t for t, ok in zip(tables, held, strict=True) if not ok}

    async def release_lease(self, table_id: str, token: int) -> None:
        with self._reaching():
            await self._release(keys=[lease_key(table_id)], args=[self._holder(token)])

    def _locate_keys(self, table_id: str) -> list[str]:
        return [lease_key(table_id), state_key(table_id), log_key(table_id), table_key(table_id)]

    def _location(self, found: list[bytes]) -> Location:
        where = Whereabouts(found[0].decode())
        if where is not Whereabouts.HOSTED:
            return Location(where)
        node_id, incarnation, _ = found[1].decode().rsplit("/", 2)
        return Location(where, node_id, incarnation)

    async def locate(self, table_id: str) -> Location:
        with self._reaching():
            found = await self._locate(keys=self._locate_keys(table_id))
        return self._location(found)

    async def adoptable_tables(self) -> list[str]:
        with self._reaching():
            hosted = sorted(raw.decode() for raw in await self._redis.smembers(HOSTED_KEY))
            if not hosted:
                return []
            async with self._redis.pipeline(transaction=False) as pipe:
                for table_id in hosted:
                    await self._locate(keys=self._locate_keys(table_id), client=pipe)
                found = await pipe.execute()
            places = {t: self._location(f) for t, f in zip(hosted, found, strict=True)}
            gone = [t for t, p in places.items() if p.where in (CLOSED, UNKNOWN)]
            if gone:
                await self._redis.srem(HOSTED_KEY, *gone)
        return [
            table_id
            for table_id, place in places.items()
            if place.where is Whereabouts.MOVING
            or (place.node == self.node_id and (place.incarnation or "") < self.incarnation)
        ]

    async def append_log(
        self,
        table_id: str,
        token: int,
        position: int,
        entry: bytes,
        channel: str = "",
        announce: bytes | None = None,
    ) -> None:
        args = [
            self._holder(token),
            position,
            entry,
            channel if announce is not None else "",
            announce or b"",
        ]
        with self._reaching():
            written = await self._append(keys=[lease_key(table_id), log_key(table_id)], args=args)
        if written == 0:
            raise LeaseLost(f"{table_id}: the lease is not held with token {token}")
        if written < 0:
            raise LeaseLost(f"{table_id}: the log is not at entry {position - 1}")

    async def read_log(self, table_id: str) -> list[bytes]:
        with self._reaching():
            entries = await self._redis.xrange(log_key(table_id))
        return [fields[b"e"] for _, fields in entries]

    async def retire_table(
        self,
        table_id: str,
        token: int,
        record: bytes,
        keep: float,
        players: Iterable[str] = (),
    ) -> None:
        keys = [
            lease_key(table_id),
            epoch_key(table_id),
            state_key(table_id),
            log_key(table_id),
            table_key(table_id),
            game_key(table_id),
        ]
        with self._reaching():
            retired = await self._retire(
                keys=keys, args=[self._holder(token), max(1, int(keep * 1000)), record]
            )
            if not retired:
                raise LeaseLost(table_id)
            # The sets below live in other slots: a second step, which readers tolerate.
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.srem(HOSTED_KEY, table_id)
                pipe.srem(LOBBY_KEY, table_id)
                for player in players:
                    pipe.srem(player_tables_key(player), table_id)
                await pipe.execute()

    async def game_record(self, table_id: str) -> bytes | None:
        with self._reaching():
            return await self._redis.get(game_key(table_id))

    # ------------------------------------------------------------------ players
    async def add_player_table(self, player: str, table_id: str) -> None:
        with self._reaching():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.sadd(player_tables_key(player), table_id)
                pipe.expire(player_tables_key(player), PLAYER_TABLES_TTL)
                await pipe.execute()

    async def remove_player_table(self, player: str, table_id: str) -> None:
        with self._reaching():
            await self._redis.srem(player_tables_key(player), table_id)

    async def player_tables(self, player: str) -> list[str]:
        with self._reaching():
            members = await self._redis.smembers(player_tables_key(player))
        return sorted(member.decode() for member in members)

    # ------------------------------------------------------------------ presence
    async def heartbeat(self, ttl: float) -> None:
        with self._reaching():
            await self._heartbeat(keys=[NODES_KEY], args=[self.node_id, round(ttl * 1000)])

    async def live_nodes(self) -> set[str]:
        with self._reaching():
            nodes = await self._live_nodes(keys=[NODES_KEY])
        return {node.decode() for node in nodes}

    # ------------------------------------------------------------------ leaderboards
    async def submit_score(self, game: str, player: str, name: str, score: int) -> None:
        with self._reaching():
            await self._submit_score(keys=leaderboard_keys(game), args=[player, name, score])

    async def top_scores(self, game: str, limit: int) -> list[tuple[str, str, int]]:
        if limit <= 0:
            return []
        with self._reaching():
            flat = await self._top_scores(keys=leaderboard_keys(game), args=[limit])
        return [
            (flat[i].decode(), flat[i + 1].decode(), int(float(flat[i + 2])))
            for i in range(0, len(flat), 3)
        ]

    # ------------------------------------------------------------------ bus
    async def publish(self, channel: str, data: bytes) -> None:
        with self._reaching():
            await self._redis.publish(channel, data)

    async def subscribe(self, channel: str, handler: Handler) -> None:
        try:
            async with asyncio.timeout(SUBSCRIBE_TIMEOUT):
                if channel not in self._handlers:
                    await self._wait_online()
                async with self._subscriptions:
                    await self._add_handler(channel, handler)
        except TimeoutError as error:
            raise StoreUnavailable(f"redis: cannot subscribe to {channel}") from error

    async def _add_handler(self, channel: str, handler: Handler) -> None:
        """Register ``handler``; on a new channel, subscribe and wait for Redis's confirmation."""
        handlers = self._handlers.get(channel)
        if handlers is not None:
            handlers.append(handler)
            return
        self._handlers[channel] = [handler]
        confirmed = asyncio.get_running_loop().create_future()
        self._confirmations[channel] = confirmed
        try:
            await self._send_on_pubsub("SUBSCRIBE", channel)
            await confirmed
        except BaseException:
            # Not confirmed: drop the handler so a later reconnection does not subscribe it.
            del self._handlers[channel]
            raise
        finally:
            del self._confirmations[channel]
            if confirmed.done() and not confirmed.cancelled():
                confirmed.exception()  # retrieved: the reader may have failed it after our error

    async def unsubscribe(self, channel: str, handler: Handler) -> None:
        """Stop calling ``handler``; never unavailable, as a lost link drops the subscription."""
        async with self._subscriptions:
            handlers = self._handlers.get(channel)
            if not handlers or handler not in handlers:
                return
            handlers.remove(handler)
            if handlers:
                return
            del self._handlers[channel]
            # On failure the reader reconnects and subscribes only the channels with handlers.
            with contextlib.suppress(StoreUnavailable):
                await self._send_on_pubsub("UNSUBSCRIBE", channel)

    async def _wait_online(self) -> None:
        """Wake the reader from its backoff and wait for its next attempt to connect."""
        if self._online.is_set():
            return
        if self._reader is None:
            raise StoreUnavailable("redis: store not started")
        self._attempt_failed.clear()
        self._retry_now.set()
        online = asyncio.ensure_future(self._online.wait())
        failed = asyncio.ensure_future(self._attempt_failed.wait())
        try:
            await asyncio.wait([online, failed], return_when=asyncio.FIRST_COMPLETED)
        finally:
            online.cancel()
            failed.cancel()
        if not self._online.is_set():
            raise StoreUnavailable("redis: pub/sub connection is down")

    async def _send_on_pubsub(self, *command: str) -> None:
        """Send a command on the live pub/sub connection; only the reader may (re)connect it."""
        connection = self._pubsub.connection
        if not self._online.is_set() or connection is None or not connection.is_connected:
            raise StoreUnavailable("redis: pub/sub connection is down")
        with self._reaching():
            await self._pubsub.execute_command(*command)

    # ------------------------------------------------------------------ pub/sub reader
    async def _read_forever(self) -> None:
        """Keep the pub/sub connection up and dispatch what it receives, until cancelled."""
        delays = PUBSUB_BACKOFF.delays()
        outage = False
        while True:
            try:
                await self._connect_pubsub()
                delays = PUBSUB_BACKOFF.delays()
                if outage and self.on_bus_recovered is not None:
                    asyncio.get_running_loop().call_soon(self.on_bus_recovered)
                outage = True  # whatever ends the next dispatch is one
                await self._dispatch_until_lost()
            except UNREACHABLE as error:
                # Warn once per outage, not at every failed attempt while Redis is down.
                level = logging.WARNING if self._online.is_set() else logging.DEBUG
                self._online.clear()
                log.log(level, "redis pub/sub connection lost: %s; reconnecting", error)
            except Exception:
                self._online.clear()
                log.exception("redis pub/sub reader failed; reconnecting")
            self._retry_now.clear()  # a wake from before this failure was answered by it
            self._attempt_failed.set()
            for confirmed in self._confirmations.values():
                if not confirmed.done():
                    confirmed.set_exception(StoreUnavailable("redis: pub/sub connection lost"))
            async with self._subscriptions:
                if self._pubsub.connection is not None:
                    with contextlib.suppress(*UNREACHABLE):
                        await self._pubsub.connection.disconnect(nowait=True)
            # At most one attempt per first delay however often the reader is woken.
            first = PUBSUB_BACKOFF.first / 2
            await asyncio.sleep(first)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, next(delays) - first)):
                    await self._retry_now.wait()

    async def _connect_pubsub(self) -> None:
        """Connect and subscribe every channel that has handlers."""
        async with self._subscriptions:
            await self._pubsub.connect()
            if self._handlers:
                await self._pubsub.execute_command("SUBSCRIBE", *self._handlers)
            self._online.set()

    async def _dispatch_until_lost(self) -> None:
        """Read messages and hand them to their handlers until the connection fails."""
        loop = asyncio.get_running_loop()
        awaiting_pong = False
        while True:
            connection = self._pubsub.connection
            if connection is None or not connection.is_connected:
                # Someone else's failed command closed it; reconnecting here would not resubscribe.
                raise redis.exceptions.ConnectionError("pub/sub connection closed")
            message = await self._pubsub.get_message(timeout=KEEPALIVE)
            if message is None:
                if awaiting_pong:
                    raise redis.exceptions.ConnectionError("no reply to PING")
                await self._pubsub.execute_command("PING")
                awaiting_pong = True
                continue
            awaiting_pong = False
            kind = message["type"]
            if kind == "message":
                channel = message["channel"].decode()
                for handler in self._handlers.get(channel, ()):
                    loop.call_soon(handler, message["data"])
            elif kind == "subscribe":
                confirmed = self._confirmations.get(message["channel"].decode())
                if confirmed is not None and not confirmed.done():
                    confirmed.set_result(None)

    # ------------------------------------------------------------------ revoked session tokens
    async def revoke_token(self, token_id: str, ttl: float) -> None:
        """``bd:revoked:{TOKEN}`` (string), expiring with the token itself."""
        with self._reaching():
            await self._redis.set(revoked_key(token_id), b"1", px=max(1, round(ttl * 1000)))

    async def token_revoked(self, token_id: str) -> bool:
        with self._reaching():
            return bool(await self._redis.exists(revoked_key(token_id)))


def revoked_key(token_id: str) -> str:
    """The key whose presence says a session token was revoked (it expires with the token)."""
    return f"bd:revoked:{{{token_id}}}"
