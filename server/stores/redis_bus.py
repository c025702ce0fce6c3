"""The bus on Redis: publish/subscribe between every node that shares one Redis.

Theory of operation
-------------------
One pub/sub connection per bundle, read by one background task that hands each message to the
channel's handlers with ``loop.call_soon`` (the same as the in-memory bus). When the connection
drops the task reconnects on the retry policy's backoff (woken at once when the link's health
sees Redis back) and subscribes every channel that still has handlers; messages published while
it was down are lost, as Redis pub/sub never keeps them: once Redis has confirmed every
subscription (a PING sent after them is answered) the node is told (``on_recovered``) and
fetches what it may have missed. A publish fails fast like any command (:mod:`.redis_link`).
Log appends publish their announcements from inside their own script
(:mod:`blackdrez.server.stores.redis_tables`), not through this class.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis.exceptions
from redis.asyncio.client import PubSub

from blackdrez.server.stores.base import Bus, Handler, StoreUnavailable
from blackdrez.server.stores.redis_link import (
    RECONNECT_BACKOFF,
    UNREACHABLE,
    RedisLink,
    lost_connection,
    refuses_writes,
)
from blackdrez.server.tasks import cancel_until_done

log = logging.getLogger("blackdrez.store")

SUBSCRIBE_TIMEOUT = 2.0
"""How long :meth:`RedisBus.subscribe` waits for the connection and for Redis's confirmation."""
KEEPALIVE = 5.0
"""Idle seconds before the pub/sub reader pings; no reply by the next idle period is a dead link."""


class RedisBus(Bus):
    """Publish/subscribe on one Redis (see the module docstring)."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._pubsub: PubSub = self._new_pubsub()
        self._handlers: dict[str, list[Handler]] = {}
        self._confirmations: dict[str, asyncio.Future[None]] = {}
        self._subscriptions = asyncio.Lock()
        self._online = asyncio.Event()
        self._recovery_unannounced = False
        """Reconnected after an outage: ``on_recovered`` is due at the PONG that follows."""
        self._retry_now = asyncio.Event()
        self._attempt_failed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        link.health.listeners.append(self._retry_now.set)

    @property
    def online(self) -> bool:
        """Whether the pub/sub connection is up (every channel with handlers subscribed)."""
        return self._online.is_set()

    def _new_pubsub(self) -> PubSub:
        """The pub/sub link (made once: it reconnects to the same server)."""
        pubsub: PubSub = self._link.redis.pubsub()
        return pubsub

    async def _pubsub_for_next_attempt(self) -> PubSub:
        """The pub/sub link the reader should connect next (the same one, for one server)."""
        return self._pubsub

    async def start(self) -> None:
        """Start the pub/sub reader; Redis need not be up yet (it connects when it can)."""
        if self._reader is None:
            self._reader = asyncio.create_task(self._read_forever(), name="redis-store-pubsub")

    async def close(self) -> None:
        """Stop the pub/sub reader and close its connection."""
        # The reader takes a lost cancellation for a quiet link and reads on (see server.tasks).
        if self._reader is not None:
            await cancel_until_done([self._reader])
        self._reader = None
        self._online.clear()
        self._handlers.clear()
        with contextlib.suppress(*UNREACHABLE):
            await self._pubsub.aclose()

    async def publish(self, channel: str, data: bytes) -> None:
        with self._link.reaching():
            await self._link.redis.publish(channel, data)

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
        try:  # only written: Redis answers the reader, so it is no sign that Redis is up
            await self._pubsub.execute_command(*command)
        except UNREACHABLE as error:
            self._link.health.failed(error)
            raise StoreUnavailable(f"redis: {error}") from error

    # ------------------------------------------------------------------ pub/sub reader
    async def _read_forever(self) -> None:
        """Keep the pub/sub connection up and dispatch what it receives, until cancelled."""
        delays = RECONNECT_BACKOFF.delays()
        outage = False
        while True:
            try:
                await self._connect_pubsub(announce=outage)
                delays = RECONNECT_BACKOFF.delays()
                outage = True  # whatever ends the next dispatch is one
                await self._dispatch_until_lost()
            except UNREACHABLE as error:
                # Warn once per outage, not at every failed attempt while Redis is down.
                level = logging.WARNING if self._online.is_set() else logging.DEBUG
                self._online.clear()
                log.log(level, "redis pub/sub connection lost: %s; reconnecting", error)
            except Exception as error:
                self._online.clear()
                if lost_connection(error):  # (redis-py failing again while it cleans up)
                    log.warning("redis pub/sub connection lost: %r; reconnecting", error)
                else:
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
            first = RECONNECT_BACKOFF.first / 2
            await asyncio.sleep(first)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, next(delays) - first)):
                    await self._retry_now.wait()

    async def _connect_pubsub(self, announce: bool) -> None:
        """Connect and subscribe every channel that has handlers; to ``announce`` a recovery,
        also PING: its PONG comes after every subscription is confirmed, and only then is
        ``on_recovered`` called (what was published before that, it must fetch; what is
        published after, the handlers hear)."""
        async with self._subscriptions:
            self._pubsub = await self._pubsub_for_next_attempt()
            await self._pubsub.connect()
            if self._handlers:
                await self._pubsub.execute_command("SUBSCRIBE", *self._handlers)
            if announce:
                await self._pubsub.execute_command("PING")
            self._recovery_unannounced = announce
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
            try:
                message = await self._pubsub.get_message(timeout=KEEPALIVE)
            except redis.exceptions.ResponseError as error:
                if not refuses_writes(error):
                    raise
                # Redis answered a PING by refusing it, as it refuses writes while it cannot
                # persist them: the link is alive, and the answer counts as the pong.
                message = {"type": "pong"}
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
            elif kind == "pong" and self._recovery_unannounced:
                self._recovery_unannounced = False
                if self.on_recovered is not None:
                    loop.call_soon(self.on_recovered)
