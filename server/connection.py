"""One client's WebSocket connection: its identity, encoding, rate limit and outgoing buffer.

Frames to a client are written at once, without awaiting (as ``websockets.broadcast`` does), so
one slow reader never stalls a table or the other viewers. What a client does not read piles up
in its connection's write buffer; past ``max_buffer`` bytes the client is disconnected (close code
4003) and may reconnect and resync.

Every close the server starts goes through :meth:`Connection.close`, which counts it (``on_close``)
and bounds it: the close frame follows what is already written, and a client that has not taken
it within ``close_timeout`` seconds (one that has stopped reading cannot) is cut off. Without that
bound, closing a client whose buffer is past the transport's high-water mark waits for the buffer
to drain, that is forever, and the connection and its buffer are never let go.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection, broadcast
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from blackdrez.protocol.codec import Frame, encode
from blackdrez.protocol.errors import CloseCode
from blackdrez.server.identity import Token
from blackdrez.server.ratelimit import TokenBucket

OLDEST = 0
"""The order of a connection older than every one the store orders (``Players.next_attach``
counts from 1): a new identity's first connection, of which no other can exist yet, and one
greeted while the store could not be reached. A later connection anywhere replaces it."""


@dataclass
class Watch:
    """A client's view of one table: its seat there and the last event number it was sent."""

    seat: int | None
    seq: int


@dataclass(eq=False)
class Connection:
    """A greeted connection (after ``welcome``)."""

    ws: ServerConnection
    binary: bool
    player: str
    name: str
    bucket: TokenBucket
    max_buffer: int
    """Bytes written but not yet taken by the client beyond which it is disconnected."""
    token: Token
    """The session token this connection greeted with (or was given)."""
    tables: dict[str, Watch] = field(default_factory=dict)
    left_to_me: dict[str, bool] = field(default_factory=dict)
    """Tables (and whether seated there, or a spectator) of an older connection of the same
    player that this one replaced, here or on another node, and does not watch (yet): when this
    one closes without having watched them, the player is away there
    (:meth:`server.node.node.Node.detach`)."""
    seated: list[str] = field(default_factory=list)
    """The tables where the player held a seat when this connection greeted (its welcome's)."""
    order: int | None = None
    """Where this connection stands among its player's connections on every node
    (``Players.next_attach``): the higher replaces the lower. ``None`` until the store answered;
    :data:`OLDEST` for a new identity's first connection and one the store could not order."""
    outranked: tuple[int, list[str]] | None = None
    """The order and seated tables of a newer connection of the player on another node, heard
    of before this one's own order was known (``Node.close_replaced``)."""
    answered_elsewhere: frozenset[str] = frozenset()
    """Replaced by a connection on another node: the tables it answers for (where it found the
    player seated), which this one's close must not count the player away from."""
    lobby: bool = False
    bot: bool = False
    """Said so in ``hello`` (its ``client`` names a bot): shown as a bot, always ready."""
    violations: int = 0
    violations_since: float = 0.0
    last_seen: float = field(default_factory=time.monotonic)
    closing: bool = False
    close_timeout: float = 10.0
    """Seconds the client has to take its close frame before the connection is cut off."""
    on_close: Callable[[int], None] = lambda code: None
    """Told the code of every close the server starts (for the metrics)."""
    address: str = ""
    """The client address the connection counts against (login attempts are limited by it)."""

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
        self.on_close(code)
        try:
            async with asyncio.timeout(self.close_timeout):
                await self.ws.close(code, reason)
        except TimeoutError:
            self.ws.transport.abort()
        except ConnectionClosed:
            pass

    async def close_now(self, code: int, reason: str) -> None:
        """Close the connection after what is already written (graceful shutdown)."""
        self.closing = True
        await self._close(code, reason)
