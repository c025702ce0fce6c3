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

from websockets.asyncio.server import ServerConnection as _ServerConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import State

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover  (websockets' wheels ship it)
    from websockets.utils import apply_mask

_OPCODES = {0x81: Opcode.TEXT, 0x82: Opcode.BINARY}
"""The first byte of a final text or binary frame without reserved bits, and its opcode."""


def _between_frames(parser: object) -> bool:
    """Whether websockets' frame parser waits for a new frame (not within one): the innermost
    generator it waits in is the reader's ``at_eof``, the first step of each frame."""
    innermost = parser
    while (inner := getattr(innermost, "gi_yieldfrom", None)) is not None:
        innermost = inner
    return getattr(innermost, "__name__", None) == "at_eof"


class ServerConnection(_ServerConnection):
    """websockets' server connection, reading the common frames itself (see the module
    docstring)."""

    _held = b""
    """The start of a frame cut across reads (this reader's, websockets has not seen it)."""
    frames_read = 0
    """Frames this reader took (the rest: websockets')."""

    def data_received(self, data: bytes) -> None:
        if not self._held:
            protocol = self.protocol
            if (
                protocol.state is not State.OPEN
                or protocol.extensions
                or protocol.current_size is not None
                or protocol.reader.buffer
                or not _between_frames(protocol.parser)
            ):
                super().data_received(data)
                return
        else:
            data = self._held + data
            self._held = b""
        limit = self.protocol.max_message_size
        size, at, frames = len(data), 0, []
        while at < size:
            if size - at < 2:
                self._held = data[at:]
                break
            opcode = _OPCODES.get(data[at])
            second = data[at + 1]
            if opcode is None or not second & 0x80:
                break  # not ours: websockets' from here
            length = second & 0x7F
            start = at + 6
            if length == 126:
                if size - at < 4:
                    self._held = data[at:]
                    break
                length = int.from_bytes(data[at + 2 : at + 4])
                start = at + 8
            elif length == 127:
                break
            if limit is not None and length > limit:
                break
            end = start + length
            if end > size:
                self._held = data[at:]
                break
            frames.append(Frame(opcode, apply_mask(data[start:end], data[start - 4 : start])))
            at = end
        else:
            at = size
        if frames:
            self.frames_read += len(frames)
            put = self.recv_messages.put
            for frame in frames:
                put(frame)
        if not self._held and at < size:
            super().data_received(data[at:])
