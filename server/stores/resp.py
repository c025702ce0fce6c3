"""The least Redis connection the group commit needs: RESP2 on one asyncio transport.

Theory of operation
-------------------
A node on Redis logs every action with one script call, and at moderate load the group commit
(:mod:`blackdrez.server.stores.redis`) sends most batches with a single append in them: the cost of
one
call is then the node's cost per action. Through redis-py a call passes the client, the
connection pool (a lock, a queue, a health check), a command packer with an encoder per argument
and a general reply parser: about 300 µs of the node's CPU per call on the benchmark machine
(``benchmarks/group_commit.py``, "one by one"). This module keeps only what that call needs.

The core is sans-I/O and pure: :func:`pack` turns a command into bytes, :func:`parse` takes one
complete reply off the front of a buffer (or says it is incomplete). :class:`RespConnection` is
the thin asyncio adapter: :meth:`RespConnection.call` writes a command and returns a future;
Redis answers in order, so each reply resolves the oldest waiting future. Several calls may be
out at once (pipelining): their bytes go out in the order of the calls.
:meth:`RespConnection.call_then` hands the reply to a callback instead, from inside the protocol
callback that read it: whoever waits on what the callback settles runs one event-loop turn
sooner than behind a future's awaiter (a turn is several milliseconds on a busy node).

Failures, none retried here (the caller decides):

* an error reply fails its own call only, with redis-py's exception class for it (``NOSCRIPT``
  is :class:`redis.exceptions.NoScriptError`, ``READONLY`` a
  :class:`redis.exceptions.ReadOnlyError`...), so the store treats it as it treats redis-py's;
* a lost connection fails every waiting call with :class:`redis.exceptions.ConnectionError`,
  and every later call at once (a connection is never reopened: the caller opens another);
* a call not answered within its timeout closes the connection and fails every waiting call with
  :class:`redis.exceptions.TimeoutError`: a late reply would otherwise be taken for the next
  call's;
* bytes that are not RESP close the connection the same way.

:func:`RespConnection.open` reads a ``redis://`` or ``unix://`` URL with redis-py's own parser
(host, port, user, password, database) and sends ``AUTH`` and ``SELECT`` as redis-py would. TLS
(``rediss://``) is not handled: :func:`supports` says so, and the caller uses redis-py then.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, cast

import redis.exceptions
from redis._parsers.base import BaseParser
from redis.asyncio.connection import parse_url

Argument = bytes | str | int
"""What a command is made of: text is sent as UTF-8, integers in decimal."""


Then = Callable[[Any], None]
"""Gets a call's reply, or its failure as an exception instance (an error reply, a lost
connection, a timeout); it must not raise."""


class Incomplete(Exception):
    """The buffer does not hold a whole reply yet."""


_BULK_HEADERS = tuple(b"$%d\r\n" % size for size in range(1024))
"""A bulk string's header for each length below 1024 (formatting one is most of packing it)."""


def pack(command: Sequence[Argument]) -> bytes:
    """The bytes of ``command`` as a RESP array of bulk strings."""
    return b"*%d\r\n" % len(command) + bulks(command)


def bulks(arguments: Sequence[Argument]) -> bytes:
    """``arguments`` as RESP bulk strings, without the array's header: part of a command
    packed ahead (:meth:`RespConnection.send_then` sends the whole)."""
    headers = _BULK_HEADERS
    parts: list[bytes] = []
    for argument in arguments:
        kind = type(argument)  # (exact types first: a call of isinstance each is dearer)
        if kind is bytes:
            data: bytes = argument  # type: ignore[assignment]
        elif kind is str:
            data = argument.encode()  # type: ignore[union-attr]
        elif kind is int:
            data = b"%d" % argument  # type: ignore[str-format]
        elif isinstance(argument, str):
            data = argument.encode()
        elif isinstance(argument, int):
            data = b"%d" % argument
        elif isinstance(argument, bytes):
            data = argument
        else:
            raise TypeError(f"a Redis argument is bytes, str or int, not {type(argument)}")
        size = len(data)
        parts += (headers[size] if size < 1024 else b"$%d\r\n" % size, data, b"\r\n")
    return b"".join(parts)


def bulk(data: bytes) -> bytes:
    """One bulk string: ``bulks((data,))`` for bytes, without the pass over arguments."""
    size = len(data)
    return (_BULK_HEADERS[size] if size < 1024 else b"$%d\r\n" % size) + data + b"\r\n"


def parse(buffer: bytes | bytearray, start: int = 0) -> tuple[Any, int]:
    """The reply that begins at ``start`` and where the next begins. Replies: ``int``,
    ``bytes`` (simple and bulk strings), ``list``, ``None`` (null), or for an error reply the
    :class:`redis.exceptions.RedisError` redis-py would raise for it (returned, not raised).
    Raises :class:`Incomplete` when the reply is not all there, and
    :class:`redis.exceptions.InvalidResponse` for bytes that are not RESP."""
    end = buffer.find(b"\r\n", start)
    if end < 0:
        raise Incomplete
    kind, line, after = buffer[start], buffer[start + 1 : end], end + 2
    try:
        if kind == 0x3A:  # ":" integer
            return int(line), after
        if kind == 0x24:  # "$" bulk string
            size = int(line)
            if size < 0:
                return None, after
            stop = after + size
            if len(buffer) < stop + 2:
                raise Incomplete
            return bytes(buffer[after:stop]), stop + 2
        if kind == 0x2A:  # "*" array
            count = int(line)
            if count < 0:
                return None, after
            items = []
            for _ in range(count):
                item, after = parse(buffer, after)
                items.append(item)
            return items, after
    except ValueError as error:
        raise redis.exceptions.InvalidResponse(f"bad RESP length or integer: {error}") from None
    if kind == 0x2B:  # "+" simple string
        return bytes(line), after
    if kind == 0x2D:  # "-" error
        return BaseParser.parse_error(bytes(line).decode(errors="replace")), after
    raise redis.exceptions.InvalidResponse(f"not a RESP reply: {bytes(buffer[start:end])!r}")


def supports(url: str) -> bool:
    """Whether :meth:`RespConnection.open` can open ``url`` (plain TCP or a Unix socket)."""
    return url.startswith(("redis://", "unix://"))


class RespConnection(asyncio.Protocol):
    """One connection to Redis: calls answered in order (see the module docstring)."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._buffer = b""
        self._waiting: deque[tuple[asyncio.Future[Any] | Then, asyncio.TimerHandle]] = deque()
        self._lost: redis.exceptions.RedisError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The connection's loop, asked for once (:meth:`_running_loop`)."""

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The loop the connection runs in: asked for once (on Python 3.11 every asking is a
        ``getpid`` system call, and the group commit sends a batch every busy millisecond)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    @classmethod
    async def open(cls, url: str, timeout: float, unacked: float | None = None) -> RespConnection:
        """Connect to the Redis of ``url`` and log in (``AUTH``, ``SELECT``), all within
        ``timeout`` seconds. ``unacked``: seconds sent bytes may go unacknowledged before the
        kernel drops the connection and what it still holds (``TCP_USER_TIMEOUT``, Linux): a
        closed connection then never delivers a command late."""
        if not supports(url):
            raise ValueError(f"{url}: only redis:// and unix:// URLs (no TLS)")
        options = parse_url(url)
        loop = asyncio.get_running_loop()
        connection: RespConnection | None = None
        try:
            async with asyncio.timeout(timeout):
                if "path" in options:
                    _, connection = await loop.create_unix_connection(cls, options["path"])
                else:
                    host, port = options.get("host", "localhost"), options.get("port", 6379)
                    transport, connection = await loop.create_connection(cls, host, port)
                    sock = transport.get_extra_info("socket")
                    if (
                        unacked is not None
                        and sock is not None
                        and hasattr(socket, "TCP_USER_TIMEOUT")
                    ):
                        sock.setsockopt(
                            socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(unacked * 1000)
                        )
                login: list[Any] = []
                if options.get("password") is not None:
                    user = [options["username"]] if options.get("username") else []
                    login.append(connection.call(["AUTH", *user, options["password"]], timeout))
                if options.get("db"):
                    login.append(connection.call(["SELECT", options["db"]], timeout))
                await asyncio.gather(*login)
        except BaseException:
            if connection is not None:
                connection.close()
            raise
        return connection

    @property
    def lost(self) -> bool:
        """True once the connection is closed or lost: every call fails from then on."""
        return self._lost is not None

    def call(self, command: Sequence[Argument], timeout: float) -> asyncio.Future[Any]:
        """Send ``command``; the future of its reply (see :func:`parse`; an error reply is
        raised). No reply within ``timeout`` seconds closes the connection."""
        loop = self._running_loop()
        reply = loop.create_future()
        if self._lost is not None or self._transport is None:
            reply.set_exception(self._lost or redis.exceptions.ConnectionError("not connected"))
            return reply
        self._transport.write(pack(command))
        self._waiting.append((reply, loop.call_later(timeout, self._time_out, timeout)))
        return reply

    def call_then(self, command: Sequence[Argument], timeout: float, then: Then) -> None:
        """Send ``command``; ``then`` gets its reply (or failure: see :data:`Then`), called from
        the protocol callback that read it, or at once if the connection is lost."""
        self.send_then(pack(command), timeout, then)

    def send_then(self, command: bytes, timeout: float, then: Then) -> None:
        """:meth:`call_then` of a command packed already (:func:`pack`, or its header and
        :func:`bulks` of its parts)."""
        if self._lost is not None or self._transport is None:
            then(self._lost or redis.exceptions.ConnectionError("not connected"))
            return
        loop = self._running_loop()
        self._transport.write(command)
        self._waiting.append((then, loop.call_later(timeout, self._time_out, timeout)))

    def close(self) -> None:
        """Close the connection; calls still waiting fail."""
        self._fail(redis.exceptions.ConnectionError("redis connection closed"))

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's does not subclass asyncio.Transport: no isinstance check).
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        start = 0
        try:
            while start < len(buffer):
                reply, start = parse(buffer, start)
                if not self._waiting:
                    raise redis.exceptions.InvalidResponse("a reply that no call waits for")
                waiting, timer = self._waiting.popleft()
                timer.cancel()
                if callable(waiting):
                    waiting(reply)
                elif waiting.done():  # its caller gave up (cancelled)
                    continue
                elif isinstance(reply, redis.exceptions.RedisError):
                    waiting.set_exception(reply)
                else:
                    waiting.set_result(reply)
        except Incomplete:
            pass
        except redis.exceptions.InvalidResponse as error:
            self._fail(error)
            return
        self._buffer = buffer[start:]

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(redis.exceptions.ConnectionError(f"redis connection lost: {exc or 'closed'}"))

    # ------------------------------------------------------------------ failures
    def _time_out(self, timeout: float) -> None:
        self._fail(redis.exceptions.TimeoutError(f"no reply from redis within {timeout} s"))

    def _fail(self, error: redis.exceptions.RedisError) -> None:
        """Close for good: every waiting call and every later one fails with ``error``."""
        if self._lost is None:
            self._lost = error
        if self._transport is not None:
            self._transport.abort()
        while self._waiting:
            waiting, timer = self._waiting.popleft()
            timer.cancel()
            if callable(waiting):
                waiting(error)
            elif not waiting.done():
                waiting.set_exception(error)
