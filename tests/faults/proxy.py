"""A TCP proxy to the records database that a fault scenario can hold or cut.

:class:`DatabaseProxy` forwards every connection a node opens to the database. ``hold()`` stops
forwarding (bytes wait in the proxy, as when the database stalls: a node's queries hang, its
connections stay open) until ``release()``; ``cut()`` drops every connection and refuses new ones,
as when a node loses its way to the database.
"""

from __future__ import annotations

import asyncio
import contextlib


class DatabaseProxy:
    """A proxy to ``127.0.0.1:port`` (see the module docstring); ``await start()`` gives its
    own port."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        self.serving: set[asyncio.Task[None]] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    async def start(self) -> int:
        """Listen on a free loopback port; return it."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    def url_of(self, database_url: str) -> str:
        """``database_url`` (on the proxied port) through this proxy."""
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return database_url.replace(f":{self.target}/", f":{port}/")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.serving.add(task)
        task.add_done_callback(self.serving.discard)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self.writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await source.read(65536):
                    await self._flowing.wait()
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def hold(self) -> None:
        """Stop forwarding: every query in flight or sent from now on waits."""
        self._flowing.clear()

    def release(self) -> None:
        """Forward again, what waited first."""
        self._flowing.set()

    async def cut(self) -> None:
        """Drop every connection and refuse new ones."""
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()
        self._flowing.set()
        if self.serving:  # let them see their connections end before the test's loop closes
            await asyncio.wait(self.serving, timeout=5)
