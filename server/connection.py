"""One client's WebSocket connection: its identity, encoding, rate limit and outgoing buffer.

Frames to a client are written without awaiting, so one slow reader never stalls a table or the
other viewers. What a client does not read piles up in its connection's write buffer; past
``max_buffer`` bytes the client is disconnected (close code 4003) and may reconnect and resync.

Writing. A frame is framed here (:func:`wire_frame`: a server's frames are not masked, so one
encoded update framed once serves every viewer of its class) and held until the end of the
event loop's turn; then each connection's frames go in one write (:class:`Outbox`). One action
sends its player an update and the reply to their ``act``: one write, not two, and a write is
most of a frame's cost (a system call that also runs the loopback's receive path). On Redis the
update goes out from the callback that read the log's reply and the reply from the request,
resumed a pass of the loop later (``redis_tables._settle``). uvloop reads sockets before it
runs the callbacks due, so on a busy node the turn's writes were always due already when the
log's reply was read, and each reply went in a write of its own (one more write an action than
in memory); when the store settles its append the host now holds the requester's frames
(:meth:`Outbox.hold`) until the request it woke has run, and everyone else's go. A request does not
write everyone's frames when it is done (it did: the next request resumed in that turn then
wrote its player's reply apart). Nothing waits longer than a pass more than the turn, and a
connection's frames keep their order. Only permessage-deflate (``--compression``), which
compresses each frame per connection, takes websockets' own path.

Every close the server starts goes through :meth:`Connection.close`, which counts it (``on_close``)
and bounds it: the close frame follows what is already written, and a client that has not taken
it within ``close_timeout`` seconds (one that has stopped reading cannot) is cut off. Without that
bound, closing a client whose buffer is past the transport's high-water mark waits for the buffer
to drain, that is forever, and the connection and its buffer are never let go.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection, broadcast
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from blackdrez.protocol import codec
from blackdrez.protocol.codec import Frame, encode
from blackdrez.protocol.errors import CloseCode
from blackdrez.server.identity import Token
from blackdrez.server.ratelimit import TokenBucket

if TYPE_CHECKING:
    from blackdrez.server.table.room import Broadcast

_OPEN = State.OPEN
_HEADER_16 = struct.Struct("!BBH")
_HEADER_64 = struct.Struct("!BBQ")


def wire_frame(frame: Frame) -> bytes:
    """``frame`` as one final, unmasked WebSocket data frame (RFC 6455, 5.2): text for a str,
    binary for bytes."""
    if isinstance(frame, str):
        return _framed(0x81, frame.encode())
    return _framed(0x82, frame)


def wire_of(message: Any, binary: bool) -> bytes:
    """``message`` as its client reads it (``codec.encode``) and framed (:func:`wire_frame`), in
    one call: text straight from the JSON encoder's bytes, without their round trip through a
    str (every update and reply)."""
    if binary:
        payload, first = codec._msgpack_encoder.encode(message), 0x82
    else:
        payload, first = codec._json_encoder.encode(message), 0x81
    size = len(payload)
    if size < 126:  # (``_framed``, inline)
        return bytes((first, size)) + payload
    if size < 65536:
        return _HEADER_16.pack(first, 126, size) + payload
    return _framed(first, payload)


def _framed(first: int, payload: bytes) -> bytes:
    size = len(payload)
    if size < 126:
        return bytes((first, size)) + payload
    if size < 65536:
        return _HEADER_16.pack(first, 126, size) + payload
    return _HEADER_64.pack(first, 127, size) + payload


class Outbox:
    """The connections with frames waiting to be written, written together once the event
    loop's turn ends (see the module docstring). One per node: its connections share one
    callback a turn.

    A turn's end is the callback this schedules: it runs after the callbacks already due. A
    callback that reads a socket (uvloop reads every socket before it runs the callbacks due)
    and wakes a request whose reply is to join the frames it sends its player (the log's reply
    on Redis: the update, then the player's ``ok`` from the resumed request) calls :meth:`hold`
    for that player: their frames wait for the callbacks due after the writes, the others'
    go."""

    def __init__(self) -> None:
        self._waiting: list[Connection] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False
        self._held: set[str] | None = None
        """Players whose frames wait for a callback scheduled after the one due (:meth:`hold`)."""
        self.writes = 0
        """Writes made (each connection's frames of a turn count once)."""

    def hold(self, player: str) -> None:
        """Let ``player``'s frames wait for the callbacks already due (their woken request's
        reply, which joins them in one write); everyone else's go as planned."""
        if not self._scheduled:
            return  # the next frame schedules the writes, after everything due now
        if self._held is None:
            self._held = {player}
        else:
            self._held.add(player)

    def schedule(self) -> None:
        """Have the waiting connections written at the turn's end (a connection's first frame
        of a turn puts it in ``_waiting`` and calls this if none is scheduled:
        ``Connection._send_wire``)."""
        loop = self._loop
        if loop is None:  # (asked once: asking costs a system call, for fork safety)
            loop = self._loop = asyncio.get_running_loop()
        loop.call_soon(self._flush_soon)
        self._scheduled = True

    def _flush_soon(self) -> None:
        held = self._held
        if held is None:
            self._scheduled = False
            self.flush()
            return
        self._held = None
        waiting = self._waiting
        self._waiting = [client for client in waiting if client.player in held]
        self._write([client for client in waiting if client.player not in held])
        if self._waiting:
            assert self._loop is not None
            self._loop.call_soon(self._flush_soon)  # after the callbacks due meanwhile
        else:
            self._scheduled = False

    def flush(self) -> None:
        """Write every waiting connection's frames now."""
        waiting, self._waiting = self._waiting, []
        self._held = None
        self._write(waiting)

    def _write(self, waiting: list[Connection]) -> None:
        self.writes += len(waiting)
        for client in waiting:
            client.flush()


OLDEST = 0
"""The order of a connection older than every one the store orders (``Players.next_attach``
counts from 1): a new identity's first connection, of which no other can exist yet, and one
greeted while the store could not be reached. A later connection anywhere replaces it."""


class Watch:
    """A client's view of one table: its seat there and the last event number it was sent.
    Compiled, an extension type (``connection.pxd``), read by the fan-out's loop."""

    __slots__ = ("seat", "seq")

    def __init__(self, seat: int | None, seq: int) -> None:
        self.seat = seat
        self.seq = seq

    def __repr__(self) -> str:
        return f"Watch(seat={self.seat}, seq={self.seq})"


def _ignore_close(code: int) -> None:
    """A connection's ``on_close`` when nobody counts its closes."""


class Connection:
    """A greeted connection (after ``welcome``). Compiled (``blackdrez compile --core``), an
    extension type whose attributes ``connection.pxd`` declares (as ``__slots__`` does here):
    an attribute added here is added there too."""

    __slots__ = (
        "_deflate",
        "_out",
        "_protocol",
        "_transport_write",
        "_unsent",
        "acted",
        "acting",
        "address",
        "answered_elsewhere",
        "binary",
        "bot",
        "bucket",
        "close_timeout",
        "closing",
        "last_seen",
        "left_to_me",
        "lobby",
        "max_buffer",
        "name",
        "on_close",
        "order",
        "outbox",
        "outranked",
        "player",
        "seated",
        "tables",
        "token",
        "violations",
        "violations_since",
        "ws",
    )  # fmt: skip

    def __init__(
        self,
        *,
        ws: ServerConnection,
        binary: bool,
        player: str,
        name: str,
        bucket: TokenBucket,
        max_buffer: int,
        token: Token,
        seated: list[str] | None = None,
        order: int | None = None,
        bot: bool = False,
        close_timeout: float = 10.0,
        on_close: Callable[[int], None] = _ignore_close,
        address: str = "",
        outbox: Outbox | None = None,
    ) -> None:
        self.ws = ws
        self._protocol = ws.protocol
        """``ws``'s protocol (a connection's for its life), held here: each write reads its
        state, and a compiled connection reads its own fields directly."""
        transport = ws.transport
        self._transport_write = transport.write
        self._unsent = transport.get_write_buffer_size
        """The transport's ``write`` and the size of what it holds unsent, as bound methods:
        asked at each write (the transport's attribute lookups were as dear as the calls)."""
        self.binary = binary
        self.player = player
        self.name = name
        self.bucket = bucket
        self.max_buffer = max_buffer
        """Bytes written but not yet taken by the client beyond which it is disconnected."""
        self.token = token
        """The session token this connection greeted with (or was given)."""
        self.tables: dict[str, Watch] = {}
        self.left_to_me: dict[str, bool] = {}
        """Tables (and whether seated there, or a spectator) of an older connection of the same
        player that this one replaced, here or on another node, and does not watch (yet): when
        this one closes without having watched them, the player is away there
        (:meth:`server.node.node.Node.detach`)."""
        self.seated: list[str] = [] if seated is None else seated
        """The tables where the player held a seat when this connection greeted (its
        welcome's)."""
        self.order = order
        """Where this connection stands among its player's connections on every node
        (``Players.next_attach``): the higher replaces the lower. ``None`` until the store
        answered; :data:`OLDEST` for a new identity's first connection and one the store could
        not order."""
        self.outranked: tuple[int, list[str]] | None = None
        """The order and seated tables of a newer connection of the player on another node,
        heard of before this one's own order was known (``Node.close_replaced``)."""
        self.answered_elsewhere: frozenset[str] = frozenset()
        """Replaced by a connection on another node: the tables it answers for (where it found
        the player seated), which this one's close must not count the player away from."""
        self.lobby = False
        self.bot = bot
        """Said so in ``hello`` (its ``client`` names a bot): shown as a bot, always ready."""
        self.violations = 0
        self.violations_since = 0.0
        self.last_seen = time.monotonic()
        self.closing = False
        self.close_timeout = close_timeout
        """Seconds the client has to take its close frame before the connection is cut off."""
        self.on_close = on_close
        """Told the code of every close the server starts (for the metrics)."""
        self.address = address
        """The client address the connection counts against (login attempts are limited by
        it)."""
        self.outbox = outbox
        """Where this connection waits for its frames to be written (``None``: its own
        callback)."""
        self._out: list[bytes] | None = None
        """Framed frames not yet written (see the module docstring)."""
        self._deflate: bool | None = None
        self.acting = False
        """An action of this connection's is out to the store, not answered yet
        (``Node.act_soon``): its next request waits for the answer (:attr:`acted`)."""
        self.acted: asyncio.Future[None] | None = None
        """What the next request awaits while :attr:`acting` (made only then)."""

    def send(self, message: Any) -> None:
        """Encode ``message`` in this client's encoding and send it."""
        if self._deflate is False:  # (``send_frame``, known not to compress: every reply)
            self._send_wire(wire_of(message, self.binary))
        else:
            self.send_frame(encode(message, self.binary))

    def send_frame(self, frame: Frame) -> None:
        """Send an encoded frame (written at the end of the loop's turn)."""
        if self._deflating():
            self._send_now(frame)
        else:
            self._send_wire(wire_frame(frame))

    def send_framed(self, wire: bytes, message: Any) -> None:
        """Send ``message`` framed already for this client's encoding (``wire``: :func:`wire_of`,
        shared by every viewer it goes to); compressed, ``message`` takes websockets' path."""
        if self._deflate is False or not self._deflating():
            self._send_wire(wire)
        else:
            self._send_now(encode(message, self.binary))

    def _deflating(self) -> bool:
        deflate = self._deflate
        if deflate is None:
            deflate = self._deflate = bool(getattr(self.ws.protocol, "extensions", None))
        return deflate

    def _send_wire(self, data: bytes) -> None:
        if self.closing:  # (one not open any more: its frames are dropped at the write)
            return
        out = self._out
        if out is not None:
            out.append(data)
            return
        self._out = [data]
        outbox = self.outbox
        # (a connection's first frame of a turn: it waits for the turn's end)
        if outbox is not None:
            if not outbox._scheduled:
                outbox.schedule()
            outbox._waiting.append(self)
        else:
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Write the frames waiting (one write); a client too far behind is disconnected."""
        out, self._out = self._out, None
        if not out:
            return
        if self._protocol._state is not _OPEN:  # (not the property: per write)
            return
        self._transport_write(out[0] if len(out) == 1 else b"".join(out))
        if self._unsent() > self.max_buffer and not self.closing:
            self.close(CloseCode.SLOW_CONSUMER, "too far behind: reconnect and resync")

    def _send_now(self, frame: Frame) -> None:
        """websockets' own path (compression): frame and write ``frame`` at once."""
        ws = self.ws
        if self.closing or ws.protocol.state is not State.OPEN:
            return
        broadcast((ws,), frame)
        if ws.transport.get_write_buffer_size() > self.max_buffer:
            self.close(CloseCode.SLOW_CONSUMER, "too far behind: reconnect and resync")

    def close(self, code: int, reason: str) -> None:
        """Close the connection soon (the close frame follows what is already sent)."""
        if self.closing:
            return
        self.flush()
        self.closing = True
        asyncio.get_running_loop().create_task(self._close(code, reason))

    async def _close(self, code: int, reason: str) -> None:
        self.on_close(code)
        try:
            async with asyncio.timeout(self.close_timeout):
                await self.ws.close(code, reason)
        except TimeoutError:
            self.ws.transport.abort()
        except ConnectionClosed:
            pass

    async def close_now(self, code: int, reason: str) -> None:
        """Close the connection after what is already sent (graceful shutdown)."""
        self.flush()
        self.closing = True
        await self._close(code, reason)


def send_update(
    viewers: list[tuple[Connection, Watch]],
    broadcast: Broadcast,
    frames: dict[tuple[int | None, bool], bytes],
) -> int:
    """Send ``broadcast`` to each viewer whose snapshot does not already cover it, encoded once
    per viewer class and encoding (``frames``); how many were sent. One loop for every viewer of
    an update, not a call (and the calls it made) per viewer: it runs for each of an action's.
    The fan-out's (``blackdrez.server.node.fanout``), kept here with the connection's writes:
    compiled, ``connection.pxd`` types its viewers, whose fields and writes it then reaches
    directly (its module of coroutines stays Python)."""
    seq, events, legal = broadcast.seq, broadcast.events, broadcast.legal
    first = events[0].seq if events else seq + 1
    sent = 0
    for client, watch in viewers:
        seen = watch.seq
        if seq < seen or (events and seq == seen):
            continue
        seat = watch.seat
        if seen >= first:
            update = broadcast.for_seat(seat)
            update.events = [e for e in update.events if e.seq > seen]
            client.send(update)
        else:
            # the viewer class (``Broadcast.variant``): the seat if its copy differs, else None
            key = (seat if seat is not None and seat in legal else None, client.binary)
            wire = frames.get(key)
            if wire is None:
                wire = frames[key] = wire_of(broadcast.for_seat(seat), client.binary)
            if client._deflate is False:  # (known not to compress: ``send_framed``'s choice)
                client._send_wire(wire)
            else:
                client.send_framed(wire, broadcast.for_seat(seat))
        watch.seq = seq
        sent += 1
    return sent
