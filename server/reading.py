"""Reading clients' frames: the common case without websockets' parser, the rest with it.

Theory of operation
-------------------
websockets parses what a connection receives with a generator (a frame's header, its mask and
its payload are each a step of it, and each frame is checked and becomes an event) before the
frame reaches the message queue that ``recv`` reads: about a third of the cost of reading one
small request, every action. Nearly every frame a client sends is one small, final, masked text
or binary frame, and nearly every read holds whole frames, so :class:`ServerConnection` reads
those itself and puts them in websockets' own queue, where websockets would have put them: from
the queue on (``recv``, its flow control, the UTF-8 of text) nothing changes.

Anything else goes to websockets' parser, from the first byte it cannot take on: a control
frame (ping, pong, close), a fragment, reserved bits, an unmasked frame, a frame larger than
``max_size`` or with a 64-bit length, a connection with an extension (permessage-deflate), or
any byte before the handshake is over. The two never split a frame: this reader takes a read
only when websockets' parser stands between two frames (its buffer empty, waiting for a
header, no fragmented message open) and keeps a frame cut across reads until its end arrives,
so websockets sees every byte it is given from a frame's start, in order, and its errors,
close codes and limits apply to it unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from websockets.asyncio.client import ClientConnection as _ClientConnection
from websockets.asyncio.server import ServerConnection as _ServerConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import State

from blackdrez.server.keepalive import pings_of

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover  (websockets' wheels ship it)
    from websockets.utils import apply_mask

_OPCODES = {0x81: Opcode.TEXT, 0x82: Opcode.BINARY}
"""The first byte of a final text or binary frame without reserved bits, and its opcode."""
_TEXT, _OPEN = Opcode.TEXT, State.OPEN
"""Read as module names: on Python 3.11 a member read through its enum's class goes through
``EnumType.__getattr__``'s hook (a Python call), and these are read at every frame."""


def _between_frames(parser: object) -> bool:
    """Whether websockets' frame parser waits for a new frame (not within one): the innermost
    generator it waits in is the reader's ``at_eof``, the first step of each frame."""
    innermost = parser
    while (inner := getattr(innermost, "gi_yieldfrom", None)) is not None:
        innermost = inner
    return getattr(innermost, "__name__", None) == "at_eof"


class _Reading:
    """The reading of :class:`ServerConnection` and :class:`ClientConnection` (see the module
    docstring): a server reads masked frames, a client unmasked ones."""

    _held = b""
    """The start of a frame cut across reads (this reader's, websockets has not seen it)."""
    frames_read = 0
    """Frames this reader took (the rest: websockets')."""
    _MASKED = True
    _parser_idle = False
    """websockets' parser was seen between two frames and has been given nothing since (so it
    still is: only what it is given moves it; a failure or a close also changes the state,
    checked at every read)."""

    def data_received(self, data: bytes) -> None:
        protocol = self.protocol  # type: ignore[attr-defined]
        if not self._held:
            if protocol._state is not _OPEN or protocol.extensions:
                self._parser_idle = False
                super().data_received(data)  # type: ignore[misc]
                return
            if not self._parser_idle:
                if (
                    protocol.current_size is not None
                    or protocol.reader.buffer
                    or not _between_frames(protocol.parser)
                ):
                    super().data_received(data)  # type: ignore[misc]
                    return
                self._parser_idle = True
        else:
            data = self._held + data
            self._held = b""
        limit = protocol.max_message_size
        masked = self._MASKED
        key = 4 if masked else 0
        size, at, frames = len(data), 0, []
        while at < size:
            if size - at < 2:
                self._held = data[at:]
                break
            opcode = _OPCODES.get(data[at])
            second = data[at + 1]
            if opcode is None or bool(second & 0x80) is not masked:
                break  # not ours: websockets' from here
            length = second & 0x7F
            start = at + 2 + key
            if length == 126:
                if size - at < 4:
                    self._held = data[at:]
                    break
                length = int.from_bytes(data[at + 2 : at + 4])
                start += 2
            elif length == 127:
                break
            if limit is not None and length > limit:
                break
            end = start + length
            if end > size:
                self._held = data[at:]
                break
            payload = data[start:end]
            if masked:
                payload = apply_mask(payload, data[start - 4 : start])
            frames.append(Frame(opcode, payload))
            at = end
        else:
            at = size
        if frames:
            self.frames_read += len(frames)
            put = self.recv_messages.put  # type: ignore[attr-defined]
            for frame in frames:
                put(frame)
        if not self._held and at < size:
            self._parser_idle = False
            super().data_received(data[at:])  # type: ignore[misc]


class _Frames(list[object]):
    """websockets' queue of a connection's received frames as a list, with the two deque
    methods it calls: an empty deque is 760 bytes, an empty list 56, and the queue holds a
    frame or two at a time (so ``pop(0)`` moves next to nothing)."""

    __slots__ = ()

    def popleft(self) -> object:
        return self.pop(0)

    def extendleft(self, items: Iterable[object]) -> None:
        self[:0] = list(items)[::-1]  # as a deque's: each item put first in turn


class ServerConnection(_Reading, _ServerConnection):
    """websockets' server connection, reading the common frames itself (see the module
    docstring), with lists where websockets keeps deques that are nearly always empty (its
    received frames, and the writers waiting for the buffer to drain: ``append``, ``remove``
    and iteration): two empty deques were 1.5 KiB of each held connection; and pinged by the
    loop's keepalive timer rather than a task of its own (another 1.1 KiB)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.drain_waiters = []  # type: ignore[assignment]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.recv_messages.frames.queue = _Frames()  # type: ignore[assignment]

    async def recv(self, decode: bool | None = None) -> Any:
        """The next message, as websockets' ``recv`` returns it; a whole frame (nearly every
        message) straight from the queue of received frames, without the three coroutines,
        the generator and the checks of websockets' reading of one: what is not a whole frame
        in the queue (a fragment, text that is not UTF-8, the end), and an explicit ``decode``,
        go to websockets' own ``recv``."""
        messages = self.recv_messages
        if decode is None and not messages.get_in_progress:
            frames = messages.frames
            queue = frames.queue
            if not queue and not messages.closed:
                # Wait as websockets' queue does (its ``put`` sets the waiter; its ``abort``, at
                # the connection's end, fails it), marked busy as its ``get`` is.
                messages.get_in_progress = True
                waiter = frames.get_waiter = self.loop.create_future()
                try:
                    await waiter
                except EOFError:
                    pass
                finally:
                    frames.get_waiter = None
                    messages.get_in_progress = False
            if queue:
                frame = queue[0]
                if frame.fin:
                    data = frame.data
                    if frame.opcode is _TEXT:
                        try:
                            message: str | bytes = bytes(data).decode()
                        except UnicodeDecodeError:
                            return await super().recv()  # websockets closes with 1007
                    else:
                        message = bytes(data)  # (bytes already: no copy)
                    del queue[0]
                    if messages.paused:
                        messages.maybe_resume()
                    return message
        return await super().recv(decode)

    def start_keepalive(self) -> None:
        """Pinged by the loop's one keepalive timer, not a task of its own (see
        :mod:`blackdrez.server.keepalive`)."""
        if self.ping_interval is not None:
            pings_of(self.loop).add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        pings_of(self.loop).discard(self)
        super().connection_lost(exc)


class ClientConnection(_Reading, _ClientConnection):
    """websockets' client connection, reading the common frames (a server's are not masked)
    itself: the load tool's bots (see the module docstring)."""

    _MASKED = False
