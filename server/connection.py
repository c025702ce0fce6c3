"""One client's WebSocket connection: its identity, encoding, rate limit and outgoing buffer.

Frames to a client are written at once, without awaiting (as ``websockets.broadcast`` does), so
one slow reader never stalls a table or the other viewers. What a client does not read piles up
in its connection's write buffer; past ``max_buffer`` bytes the client is disconnected (close code
4003) and may reconnect and resync.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection, broadcast
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from protocol.codec import Frame, encode
from protocol.errors import CloseCode
from server.ratelimit import TokenBucket


@dataclass
class Watch:
    """A client's view of one table: its seat there and the last event number it was sent."""

    seat: int | None
    seq: int


@dataclass(eq=False)
class Client:
    """A greeted connection (after ``welcome``)."""

    ws: ServerConnection
    binary: bool
    player: str
    name: str
    bucket: TokenBucket
    max_buffer: int
    """Bytes written but not yet taken by the client beyond which it is disconnected."""
    tables: dict[str, Watch] = field(default_factory=dict)
    lobby: bool = False
    bot: bool = False
    """Said so in ``hello`` (its ``client`` names a bot): shown as a bot, always ready."""
    violations: int = 0
    violations_since: float = 0.0
    last_seen: float = field(default_factory=time.monotonic)
    closing: bool = False

    def send(self, message: Any) -> None:
        """Encode ``message`` in this client's encoding and write it."""
        self.send_frame(encode(message, self.binary))

    def send_frame(self, frame: Frame) -> None:
        """Write an encoded frame now; a client too far behind is disconnected."""
        ws = self.ws
        if self.closing or ws.protocol.state is not State.OPEN:
            return
        broadcast((ws,), frame)
        if ws.transport.get_write_buffer_size() > self.max_buffer:
            self.close(CloseCode.SLOW_CONSUMER, "too far behind: reconnect and resync")

    def close(self, code: int, reason: str) -> None:
        """Close the connection soon (the close frame follows what is already written)."""
        if self.closing:
            return
        self.closing = True
        asyncio.get_running_loop().create_task(self._close(code, reason))

    async def _close(self, code: int, reason: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.ws.close(code, reason)

    async def close_now(self, code: int, reason: str) -> None:
        """Close the connection after what is already written (graceful shutdown)."""
        self.closing = True
        await self._close(code, reason)
