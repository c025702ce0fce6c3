"""A TCP load balancer in a process of its own, for soaks that kill it as they kill the rest.

The compose deployment puts nginx in front of the nodes; where there is no Docker (and no nginx),
a soak needs something in that place that it can kill and start again. ``python -m
blackdrez.server.testing.balancer PORT BACKEND_PORT...`` listens on ``127.0.0.1:PORT`` and hands
each new
connection to the next backend on ``127.0.0.1`` in turn that accepts it (skipping those that
refuse, as nginx's ``proxy_next_upstream`` does), then copies bytes both ways until either side
closes. It reads nothing of HTTP or WebSocket: a handshake a node answers 503 reaches the client,
whose library tries again. :class:`Balancer` starts, kills and restarts that process.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import subprocess
import sys
import time
from collections.abc import Sequence

from blackdrez.server.testing.launcher import OneProcess
from blackdrez.server.testing.redis_server import free_port

CONNECT_TIMEOUT = 1.0
START_TIMEOUT = 30.0


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError):
        writer.close()


async def serve(port: int, backends: Sequence[int]) -> None:
    """Balance connections on ``port`` over ``backends`` until cancelled."""
    turn = itertools.cycle(range(len(backends)))

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        first = next(turn)
        for offset in range(len(backends)):
            backend = backends[(first + offset) % len(backends)]
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    node_r, node_w = await asyncio.open_connection("127.0.0.1", backend)
            except (OSError, TimeoutError):
                continue
            await asyncio.gather(_pipe(client_r, node_w), _pipe(node_r, client_w))
            return
        client_w.close()  # no backend: the client tries again

    server = await asyncio.start_server(handle, "127.0.0.1", port, reuse_address=True)
    print(f"balancing 127.0.0.1:{port} over {list(backends)}", flush=True)
    async with server:
        await server.serve_forever()


class Balancer(OneProcess):
    """The balancer process (see the module docstring) on a free port of its own."""

    def __init__(self, backends: Sequence[int], port: int | None = None) -> None:
        self.backends = list(backends)
        self.port = port or free_port()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    def start(self) -> None:
        command = [sys.executable, "-m", "blackdrez.server.testing.balancer", str(self.port)]
        self._process = subprocess.Popen(
            command + [str(port) for port in self.backends],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()  # once it listens
        if not line.startswith(b"balancing"):
            self.kill()
            raise RuntimeError(f"the balancer did not start: {line!r}")

    def kill(self) -> None:
        """Kill it at once (SIGKILL): every connection through it drops."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def close(self) -> None:
        self.kill()

    def restart(self, after: float = 0.0) -> None:
        """Kill it, wait ``after`` seconds, start it again on the same port."""
        self.kill()
        time.sleep(after)
        self.start()


if __name__ == "__main__":
    listen, *ports = (int(arg) for arg in sys.argv[1:])
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(listen, ports))
