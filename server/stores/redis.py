"""The Redis store: one lobby shared by any number of server nodes.

Theory of operation
-------------------
Key layout (every key of one table, player or game carries its id as a Redis Cluster hash tag,
so a multi-key write about one of them stays in one slot)::

    bd:secret                   string  the token-signing secret (SET NX, then GET)
    bd:t:{TABLE}:record         hash    node, record, listed ("1" / "0")
    bd:lobby:tables             set     ids of listed tables
    bd:p:{PLAYER}:tables        set     ids of the tables where the player holds a seat
    bd:nodes                    zset    node id -> expiry time (ms, Redis's clock)
    bd:lb:{GAME}                zset    "<rank key>:<player>" -> best score
    bd:lb:{GAME}:entries        hash    player -> their member in bd:lb:{GAME}
    bd:lb:{GAME}:names          hash    player -> display name sent with the best score
    bd:lb:{GAME}:seq            string  counter of improved scores (the tie-breaker)
    bd:t:{TABLE}:lease          string  the hosting node's id, with a TTL its host renews
    bd:t:{TABLE}:log            stream  every command that changed the table (field "e")
    bd:hosted                   set     ids of tables not yet retired (orphans: no lease)

Writes that touch several keys run in one MULTI/EXEC transaction or one Lua script, so a lost
connection changes all or nothing. (``bd:lobby:tables`` lives in another slot than a table's
record: under Redis Cluster that pair would need two steps, which :meth:`list_tables` tolerates
by dropping ids whose record is gone.)

Presence and leaderboards run as Lua scripts: presence reads Redis's clock so nodes need no
synchronised clocks, and a leaderboard entry is compared and replaced atomically. Equal scores
rank by who reached them first: a member starts with ``999999999999999 - seq``, zero-padded, so
``ZREVRANGE`` (equal scores in reverse lexicographic order) puts the earlier entry first.

The bus uses one pub/sub connection per store, read by one background task that hands each
message to the channel's handlers with ``loop.call_soon`` (the same as the in-memory store).
When the connection drops the task reconnects with backoff and subscribes every channel that
still has handlers; messages published while it was down are lost, as Redis pub/sub never keeps
them. Commands fail fast (short socket timeouts, no retries) and raise :class:`StoreUnavailable`,
so the caller can answer ``unavailable`` at once; the connection pool reconnects on the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Iterator

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from server.stores.base import Handler, LeaseLost, Store, StoreUnavailable

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
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 2.0

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


RENEW_SCRIPT = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
elseif not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

APPEND_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return false
end
local id = redis.call('XADD', KEYS[2], '*', 'e', ARGV[2])
if ARGV[3] ~= '' then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return id
"""

RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
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


@contextlib.contextmanager
def reaching_redis() -> Iterator[None]:
    """Turn a lost or refused Redis connection into :class:`StoreUnavailable`."""
    try:
        yield
    except UNREACHABLE as error:
        raise StoreUnavailable(f"redis: {error}") from error


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
        self._renew = self._redis.register_script(RENEW_SCRIPT)
        self._append = self._redis.register_script(APPEND_SCRIPT)
        self._release = self._redis.register_script(RELEASE_SCRIPT)
        self._pubsub: PubSub = self._redis.pubsub()
        self._handlers: dict[str, list[Handler]] = {}
        self._confirmations: dict[str, asyncio.Future[None]] = {}
        self._subscriptions = asyncio.Lock()
        self._online = asyncio.Event()
        self._retry_now = asyncio.Event()
        self._attempt_failed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

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
        self._online.clear()
        self._handlers.clear()
        with contextlib.suppress(*UNREACHABLE):
            await self._pubsub.aclose()
        with contextlib.suppress(*UNREACHABLE):
            await self._redis.aclose()

    # ------------------------------------------------------------------ secrets
    async def shared_secret(self, proposed: bytes) -> bytes:
        with reaching_redis():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(SECRET_KEY, proposed, nx=True)
                pipe.get(SECRET_KEY)
                _, secret = await pipe.execute()
        return secret

    # ------------------------------------------------------------------ lobby records
    async def put_table(self, table_id: str, node_id: str, record: bytes, listed: bool) -> None:
        fields = {"node": node_id, "record": record, "listed": "1" if listed else "0"}
        with reaching_redis():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hset(table_key(table_id), mapping=fields)
                if listed:
                    pipe.sadd(LOBBY_KEY, table_id)
                else:
                    pipe.srem(LOBBY_KEY, table_id)
                await pipe.execute()

    async def get_table(self, table_id: str) -> tuple[str, bytes] | None:
        with reaching_redis():
            node, record = await self._redis.hmget(table_key(table_id), ["node", "record"])
        if node is None or record is None:
            return None
        return node.decode(), record

    async def remove_table(self, table_id: str) -> None:
        with reaching_redis():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(table_key(table_id))
                pipe.srem(LOBBY_KEY, table_id)
                await pipe.execute()

    async def list_tables(self) -> list[bytes]:
        with reaching_redis():
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
    async def acquire_lease(self, table_id: str, ttl: float) -> bool:
        with reaching_redis():
            taken = await self._redis.set(
                lease_key(table_id), self.node_id, nx=True, px=int(ttl * 1000)
            )
            if taken:
                await self._redis.sadd(HOSTED_KEY, table_id)
        return bool(taken)

    async def renew_leases(self, table_ids: list[str], ttl: float) -> set[str]:
        if not table_ids:
            return set()
        with reaching_redis():
            async with self._redis.pipeline(transaction=False) as pipe:
                for table_id in table_ids:
                    await self._renew(
                        keys=[lease_key(table_id)],
                        args=[self.node_id, int(ttl * 1000)],
                        client=pipe,
                    )
                held = await pipe.execute()
        return {t for t, ok in zip(table_ids, held, strict=True) if not ok}

    async def release_lease(self, table_id: str) -> None:
        with reaching_redis():
            await self._release(keys=[lease_key(table_id)], args=[self.node_id])

    async def orphaned_tables(self) -> list[str]:
        with reaching_redis():
            hosted = sorted(raw.decode() for raw in await self._redis.smembers(HOSTED_KEY))
            if not hosted:
                return []
            async with self._redis.pipeline(transaction=False) as pipe:
                for table_id in hosted:
                    pipe.exists(lease_key(table_id))
                leased = await pipe.execute()
        return [t for t, held in zip(hosted, leased, strict=True) if not held]

    async def append_log(
        self, table_id: str, entry: bytes, channel: str = "", announce: bytes | None = None
    ) -> None:
        args = [self.node_id, entry, channel if announce is not None else "", announce or b""]
        with reaching_redis():
            written = await self._append(keys=[lease_key(table_id), log_key(table_id)], args=args)
        if not written:
            raise LeaseLost(table_id)

    async def read_log(self, table_id: str) -> list[bytes]:
        with reaching_redis():
            entries = await self._redis.xrange(log_key(table_id))
        return [fields[b"e"] for _, fields in entries]

    async def retire_table(self, table_id: str, keep_log: float) -> None:
        with reaching_redis():
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.srem(HOSTED_KEY, table_id)
                pipe.delete(lease_key(table_id))
                pipe.expire(log_key(table_id), max(1, int(keep_log)))
                await pipe.execute()

    # ------------------------------------------------------------------ players
    async def add_player_table(self, player: str, table_id: str) -> None:
        with reaching_redis():
            await self._redis.sadd(player_tables_key(player), table_id)

    async def remove_player_table(self, player: str, table_id: str) -> None:
        with reaching_redis():
            await self._redis.srem(player_tables_key(player), table_id)

    async def player_tables(self, player: str) -> list[str]:
        with reaching_redis():
            members = await self._redis.smembers(player_tables_key(player))
        return sorted(member.decode() for member in members)

    # ------------------------------------------------------------------ presence
    async def heartbeat(self, ttl: float) -> None:
        with reaching_redis():
            await self._heartbeat(keys=[NODES_KEY], args=[self.node_id, round(ttl * 1000)])

    async def live_nodes(self) -> set[str]:
        with reaching_redis():
            nodes = await self._live_nodes(keys=[NODES_KEY])
        return {node.decode() for node in nodes}

    # ------------------------------------------------------------------ leaderboards
    async def submit_score(self, game: str, player: str, name: str, score: int) -> None:
        with reaching_redis():
            await self._submit_score(keys=leaderboard_keys(game), args=[player, name, score])

    async def top_scores(self, game: str, limit: int) -> list[tuple[str, str, int]]:
        if limit <= 0:
            return []
        with reaching_redis():
            flat = await self._top_scores(keys=leaderboard_keys(game), args=[limit])
        return [
            (flat[i].decode(), flat[i + 1].decode(), int(float(flat[i + 2])))
            for i in range(0, len(flat), 3)
        ]

    # ------------------------------------------------------------------ bus
    async def publish(self, channel: str, data: bytes) -> None:
        with reaching_redis():
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
        with reaching_redis():
            await self._pubsub.execute_command(*command)

    # ------------------------------------------------------------------ pub/sub reader
    async def _read_forever(self) -> None:
        """Keep the pub/sub connection up and dispatch what it receives, until cancelled."""
        delay = BACKOFF_FIRST
        outage = False
        while True:
            try:
                await self._connect_pubsub()
                delay = BACKOFF_FIRST
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
            # At most one attempt per BACKOFF_FIRST however often subscribers wake the reader.
            await asyncio.sleep(BACKOFF_FIRST)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay * random.uniform(0.8, 1.2) - BACKOFF_FIRST):
                    await self._retry_now.wait()
            delay = min(delay * 2, BACKOFF_MAX)

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
        with reaching_redis():
            await self._redis.set(revoked_key(token_id), b"1", px=max(1, round(ttl * 1000)))

    async def token_revoked(self, token_id: str) -> bool:
        with reaching_redis():
            return bool(await self._redis.exists(revoked_key(token_id)))


def revoked_key(token_id: str) -> str:
    """The key whose presence says a session token was revoked (it expires with the token)."""
    return f"bd:revoked:{{{token_id}}}"
