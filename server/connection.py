"""One client's WebSocket connection: its identity, encoding, rate limit and send queue.

Frames to a client go through a bounded queue drained by one writer task, so a slow reader never
stalls a table: when its queue is full the client is disconnected (close code 4003) and may
reconnect and resync.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

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
    queue_size: int
    tables: dict[str, Watch] = field(default_factory=dict)
    lobby: bool = False
    bot: bool = False
    """Said so in ``hello`` (its ``client`` names a bot): shown as a bot, always ready."""
    violations: int = 0
    violations_since: float = 0.0
    last_seen: float = field(default_factory=time.monotonic)
    closing: bool = False

    def __post_init__(self) -> None:
        self._queue: asyncio.Queue[Frame] = asyncio.Queue(self.queue_size)
        self._writer = asyncio.get_running_loop().create_task(self._write())

    def send(self, message: Any) -> None:
        """Encode ``message`` in this client's encoding and queue it."""
        self.send_frame(encode(message, self.binary))

    def send_frame(self, frame: Frame) -> None:
        """Queue an encoded frame; a client too far behind is disconnected."""
        if self.closing:
            return
        try:
            self._queue.put_nowait(frame)
        except asyncio.QueueFull:
            self.close(CloseCode.SLOW_CONSUMER, "too far behind: reconnect and resync")

    def close(self, code: int, reason: str) -> None:
        """Close the connection now; frames still queued are dropped (the client resyncs)."""
        if self.closing:
            return
        self.closing = True
        self._writer.cancel()
        asyncio.get_running_loop().create_task(self.ws.close(code, reason))

    async def drain_and_close(self, code: int, reason: str, timeout: float = 2.0) -> None:
        """Send what is queued, then close."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), timeout)
        self.closing = True
        self._writer.cancel()
        await self.ws.close(code, reason)

    async def stop(self) -> None:
        """Stop the writer task (the connection is gone)."""
        self.closing = True
        self._writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._writer

    async def _write(self) -> None:
        queue = self._queue
        ws = self.ws
        try:
            while True:
                frame = await queue.get()
                try:
                    await ws.send(frame)
                finally:
                    queue.task_done()
        except ConnectionClosed:
            return
