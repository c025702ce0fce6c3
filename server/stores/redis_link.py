"""The connection the Redis stores share: one client, one health, failing fast.

Theory of operation
-------------------
Every Redis store of a bundle (:func:`blackdrez.server.stores.redis.redis_stores`) runs its
commands on one :class:`RedisLink`: one redis-py client with a bounded pool, the scripts
registered on it, and one :class:`~blackdrez.server.retry.StoreHealth` that every call reports
to. Commands fail fast (short socket timeouts, no retries) and raise
:class:`~blackdrez.server.stores.base.StoreUnavailable` (:meth:`RedisLink.reaching`), so the
caller can answer ``unavailable`` at once; the connection pool reconnects on the next call.

Writes that touch several keys of one slot run in one Lua script or one MULTI/EXEC transaction,
so a lost connection changes all or nothing (the keys, their owners and their slots:
:mod:`blackdrez.server.stores.keys`).

A script that runs on every action goes on a connection of its own, :class:`CommitLink`: the
group commit's ``APPEND_SCRIPT`` (:mod:`blackdrez.server.stores.redis_tables`) and the shared
rate limits' ``TAKE_TOKEN_SCRIPT``. The connection is not redis-py's: at moderate load most
batches hold one append, so the cost of one call is the node's cost per action, and redis-py's
client, pool and parser made it about 300 µs of CPU against about 150 µs on this small RESP
connection (:mod:`blackdrez.server.stores.resp`; measured in ``docs/benchmarks.md``, "Group
commit"). It sends ``EVALSHA`` (the script is loaded when the connection opens; a ``NOSCRIPT``
reply, Redis having forgotten it, means nothing ran: the call is sent again behind a ``SCRIPT
LOAD``). A failed opening waits on :data:`RECONNECT_BACKOFF` before the next, unless the health
sees Redis back first. It serves one Redis without TLS (``resp.supports``); elsewhere redis-py
carries the calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.maint_notifications import MaintNotificationsConfig

from blackdrez.server.retry import Backoff
from blackdrez.server.stores import resp
from blackdrez.server.stores.base import Link, StoreUnavailable

UNREACHABLE = (
    redis.exceptions.ConnectionError,  # includes "no connection available" from a full pool
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterError,  # a cluster refusing a slot mid-failover (CLUSTERDOWN)...
    redis.exceptions.TryAgainError,  # ...or mid-resharding
    redis.exceptions.SlotNotCoveredError,
    TimeoutError,
    OSError,
)
"""What a lost, refused or stalled connection raises (or a replica refusing writes mid-failover,
or a Redis Cluster whose slot has no master for a moment)."""


def lost_connection(error: BaseException) -> bool:
    """Whether ``error`` is, or was raised while handling, a lost or refused connection
    (:data:`UNREACHABLE`): a Redis master killed mid-read can end in another exception from the
    client's cleanup, with the lost connection as its context. Under uvloop, a write to a
    connection the kernel has dropped meanwhile (:data:`UNACKED_TIMEOUT`) raises a
    ``RuntimeError`` saying its handler is closed."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, UNREACHABLE):
            return True
        if isinstance(current, RuntimeError) and "handler is closed" in str(current):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def refuses_writes(error: BaseException) -> bool:
    """Whether Redis refused a command because it cannot persist writes (``MISCONF``: its
    append-only file or snapshot failed to be written, a full disk): it takes writes again by
    itself once its disk does, so the caller waits as for an outage. It refuses PING too; a
    script's refused write says ``MISCONF`` inside the script's error (Redis 6) or first (7)."""
    return isinstance(error, redis.exceptions.ResponseError) and "MISCONF" in str(error)


POOL_SIZE = 64
"""Connections to Redis per node, beside the pub/sub one."""
CONNECT_TIMEOUT = 1.0
COMMAND_TIMEOUT = 2.0
UNACKED_TIMEOUT = COMMAND_TIMEOUT / 2
"""Seconds a command's bytes may go unacknowledged by Redis's host before the kernel drops the
connection (``TCP_USER_TIMEOUT``), its unsent bytes with it. Without it, a command sent into a
network partition and given up on (its caller answered, the socket closed) stayed queued in the
kernel and reached Redis when the link healed, seconds or minutes later: a stale write. Shorter
than COMMAND_TIMEOUT, so the connection is gone before its caller stops waiting for it."""
KEEP_NOTHING_QUEUED: dict[str, Any] = (
    {
        "socket_keepalive": True,
        "socket_keepalive_options": {socket.TCP_USER_TIMEOUT: int(UNACKED_TIMEOUT * 1000)},
    }
    if hasattr(socket, "TCP_USER_TIMEOUT")  # Linux
    else {}
)
"""redis-py's connection options that set UNACKED_TIMEOUT."""
PROBE_TIMEOUT = 0.5
"""How long a health probe (PING) waits: a frozen Redis must not hold the probe for long."""
RECONNECT_BACKOFF = Backoff(first=0.1, cap=2.0)
"""Between attempts to reconnect the pub/sub link or a :class:`CommitLink` (either is woken
early when the store's health sees Redis back)."""


def queue_script(pipe: Any, script: AsyncScript, keys: Sequence[str], args: Sequence[Any]) -> None:
    """Queue a script call in a pipeline. EVAL sends the body (a few hundred bytes) but needs no
    SCRIPT EXISTS round trip first, and works where EVALSHA could meet a server that never saw
    the script (a promoted replica, another cluster node)."""
    pipe.execute_command("EVAL", script.script, len(keys), *keys, *args)


class RedisLink(Link):
    """One Redis (see the module docstring); on a Redis Cluster,
    :class:`~blackdrez.server.stores.redis_cluster.ClusterLink`."""

    shared = True

    def __init__(self, url: str, node_id: str, incarnation: str | None = None) -> None:
        super().__init__(node_id, incarnation)
        self.url = url
        self.refusing_writes = False
        """Redis refused a write (``MISCONF``): down until it answers the probe's PING (it
        serves reads meanwhile, which must not count as back: the health would flap)."""
        self.redis: Any = self._client(url)

    def _client(self, url: str) -> aioredis.Redis:
        """The command client for ``url`` (fails fast: no retries, short timeouts)."""
        # A bounded pool that makes a burst of commands wait for a connection (for at most
        # COMMAND_TIMEOUT) instead of failing with "too many connections". Maintenance
        # notifications (a Redis Enterprise feature, "auto" by default) off: while they may be
        # on, redis-py 8 skips its check of a pooled connection before handing it out, so
        # after a Redis restart each stale connection failed the command sent on it.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=POOL_SIZE,
            timeout=COMMAND_TIMEOUT,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=COMMAND_TIMEOUT,
            maint_notifications_config=MaintNotificationsConfig(enabled=False),
            **KEEP_NOTHING_QUEUED,
        )
        return aioredis.Redis(connection_pool=pool, retry=Retry(NoBackoff(), 0))

    def script(self, body: str) -> AsyncScript:
        """``body`` registered on the client (sent as EVALSHA, loaded on ``NOSCRIPT``)."""
        script: AsyncScript = self.redis.register_script(body)
        return script

    def commit_link(self, script: str) -> CommitLink | None:
        """A connection of ``script``'s own (:class:`CommitLink`), woken when Redis is back;
        ``None`` where redis-py must carry its calls (a TLS URL, a cluster)."""
        if not resp.supports(self.url):
            return None
        link = CommitLink(self.url, script)
        self.health.listeners.append(link.retry_now)
        return link

    @contextlib.contextmanager
    def reaching(self) -> Iterator[None]:
        """Turn a lost or refused Redis connection into :class:`StoreUnavailable`, and tell the
        health how the call went."""
        try:
            yield
        except UNREACHABLE as error:
            self.health.failed(error)
            raise StoreUnavailable(f"redis: {error}") from error
        except redis.exceptions.ResponseError as error:
            if refuses_writes(error):
                self.refusing_writes = True
                self.health.failed(error)
                raise StoreUnavailable(f"redis: {error}") from error
            # Protected mode answers every command of a client from another host with DENIED.
            if not str(error).startswith("DENIED"):
                raise
            refused = StoreUnavailable(
                "redis: protected mode refuses clients from other hosts "
                "(run redis-server with --protected-mode no, a password or a bind address)"
            )
            self.health.failed(refused)
            raise refused from error
        if not self.refusing_writes:
            self.health.succeeded()

    async def ping(self) -> None:
        with self.reaching():
            async with asyncio.timeout(PROBE_TIMEOUT):
                await self.redis.ping()
            self.refusing_writes = False  # (PING is refused as writes are)

    async def close(self) -> None:
        """Stop the health's probe and close every connection of the client."""
        self.health.close()
        with contextlib.suppress(*UNREACHABLE):
            await self.redis.aclose()
        # The client does not own the pool it was given: its connections stay open otherwise.
        pool = getattr(self.redis, "connection_pool", None)  # (a cluster client has none)
        if pool is not None:
            with contextlib.suppress(*UNREACHABLE):
                await pool.disconnect()


class CommitLink:
    """A script's own connection to one Redis: ``EVALSHA`` of ``script`` on a
    :class:`~blackdrez.server.stores.resp.RespConnection`, opened on demand and again after a
    failure on :data:`RECONNECT_BACKOFF` (see the module docstring): no pool, no redis-py
    encoder, a fraction of the CPU of redis-py's call."""

    def __init__(self, url: str, script: str) -> None:
        self._url = url
        self._connection: resp.RespConnection | None = None
        self._connecting = asyncio.Lock()
        self._delays = RECONNECT_BACKOFF.delays()
        self._not_before = 0.0
        self._closed = False
        self._load = [b"SCRIPT", b"LOAD", script.encode()]
        self._sha = hashlib.sha1(script.encode()).hexdigest().encode()
        self._evalsha = resp.bulks((b"EVALSHA", self._sha))

    def retry_now(self) -> None:
        """Redis answers again: the next call connects at once, whatever the backoff said."""
        self._not_before = 0.0

    def send(
        self, keys: int, packed_keys: bytes, args: int, packed_args: bytes, then: resp.Then
    ) -> bool:
        """Run the script on the open connection with ``keys`` keys and ``args`` arguments,
        packed already (:func:`~blackdrez.server.stores.resp.bulks`), ``then`` getting the
        reply or failure (see :meth:`~blackdrez.server.stores.resp.RespConnection.call_then`).
        False, nothing sent, when no connection is open: :meth:`call` opens one."""
        connection = self._connection
        if connection is None or connection.lost:
            return False
        head = b"*%d\r\n%s" % (3 + keys + args, self._evalsha) + resp.bulks((keys,))
        connection.send_then(head + packed_keys + packed_args, COMMAND_TIMEOUT, then)
        return True

    async def call(self, keys: list[str], args: list[Any], load: bool = False) -> Any:
        """Run the script with ``keys`` and ``args``: its reply. Raises what
        :class:`~blackdrez.server.stores.resp.RespConnection` raises (redis-py's exceptions).
        ``load``: Redis said it forgot the script: load it first, in the same round trip."""
        connection = await self._connected()
        command = [b"EVALSHA", self._sha, len(keys), *keys, *args]
        if not load:
            try:
                return await connection.call(command, COMMAND_TIMEOUT)
            except redis.exceptions.NoScriptError:
                pass  # Redis lost its scripts but not this connection (SCRIPT FLUSH): nothing ran
        loaded = connection.call(self._load, COMMAND_TIMEOUT)
        _, written = await asyncio.gather(loaded, connection.call(command, COMMAND_TIMEOUT))
        return written

    async def command(self, command: Sequence[resp.Argument]) -> Any:
        """Any other command on this connection (opened if need be): its reply, as
        :func:`~blackdrez.server.stores.resp.parse` reads it (a fraction of redis-py's time for
        a long one). Raises what :meth:`call` raises."""
        connection = await self._connected()
        return await connection.call(command, COMMAND_TIMEOUT)

    async def _connected(self) -> resp.RespConnection:
        """The open connection, or a new one: one at a time (two calls that each opened one
        kept only the second, and the first stayed open after :meth:`close`, so the data
        folder's Redis, which shuts down once no other client is left, outlived its node)."""
        async with self._connecting:
            connection = self._connection
            if connection is None or connection.lost:
                connection = await self._connect()
            return connection

    async def _connect(self) -> resp.RespConnection:
        """A new connection with the script loaded (a restarted Redis has forgotten it)."""
        if self._closed:
            raise redis.exceptions.ConnectionError("the store is closed")
        loop = asyncio.get_running_loop()
        if loop.time() < self._not_before:
            raise redis.exceptions.ConnectionError("redis: waiting to reconnect (backoff)")
        try:
            connection = await resp.RespConnection.open(
                self._url, CONNECT_TIMEOUT, unacked=UNACKED_TIMEOUT
            )
            try:
                await connection.call(self._load, COMMAND_TIMEOUT)
            except BaseException:
                connection.close()
                raise
        except BaseException:
            self._not_before = loop.time() + next(self._delays)
            raise
        if self._closed:  # closed while this opened: a connection kept now would never close
            connection.close()
            raise redis.exceptions.ConnectionError("the store is closed")
        self._delays = RECONNECT_BACKOFF.delays()
        self._connection = connection
        return connection

    def close(self) -> None:
        """Close the connection for good: later calls fail."""
        self._closed = True
        if self._connection is not None:
            self._connection.close()
