"""A real server process with the fourth game registered, and a plain JSON WebSocket player.

:func:`running_server` starts ``blackdrez serve`` (in memory, records in a SQLite file) in a
process whose environment registers the game: the one registration line is
:data:`REGISTERED`. :func:`play` speaks the protocol as the browser does, JSON frames over a
WebSocket, so nothing of the game is imported on this side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import websockets

from blackdrez.server.testing.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
REGISTERED = {"BLACKDREZ_GAMES": "tests.fourth_game"}
"""The registration: the game's module named in the environment of every process that serves,
verifies or replays it."""
START_TIMEOUT = 30.0


def environment() -> dict[str, str]:
    """This process's environment with the game registered (and the checkout importable)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, **REGISTERED, "PYTHONPATH": path}


@contextmanager
def running_server(data: Path) -> Iterator[str]:
    """A server with the game registered, keeping its records in ``data``/records.db; yields
    its ``http://`` base address."""
    port = free_port()
    command = [
        sys.executable, "-m", "blackdrez.tools.cli", "serve", "--in-memory",
        "--host", "127.0.0.1", "--port", str(port), "--db-url", f"sqlite:///{data / 'records.db'}",
    ]  # fmt: skip
    process = subprocess.Popen(command, env=environment(), cwd=data, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


async def play(base: str, game: str, choose: Any) -> dict[str, Any]:
    """Start a ``game`` session as a new guest and play it to the end, ``choose(view, legal)``
    picking each action; returns the last ``update``/``snapshot`` state (``table``, ``view``,
    ``legal``, ``info``, ``events``)."""
    url = base.replace("http://", "ws://") + "/"
    async with websockets.connect(url) as socket:

        async def receive(kind: str) -> dict[str, Any]:
            while True:
                message = json.loads(await socket.recv())
                if message["type"] == "error":
                    raise AssertionError(message)
                if message["type"] == kind:
                    return message

        await socket.send(json.dumps({"type": "hello", "versions": [1], "client": "fourth"}))
        await receive("welcome")
        await socket.send(json.dumps({"type": "start_solitaire", "id": 1, "game": game}))
        joined = await receive("joined")
        state: dict[str, Any] = {"table": joined["table"], "events": []}
        table = joined["table"]["id"]
        await socket.send(json.dumps({"type": "resync", "id": 2, "table": table, "since": 0}))
        while True:
            message = json.loads(await socket.recv())
            if message["type"] not in ("snapshot", "update") or message.get("table") != table:
                continue
            numbered = message["events"] if message["type"] == "update" else message["recent"]
            state["events"] += [n["event"] for n in numbered]
            state.update(view=message["view"], legal=message["legal"])
            if message.get("info"):
                state["info"] = message["info"]
            if state["view"] is not None and state["view"]["over"]:
                if state.get("info", {}).get("status") == "finished":
                    return state
                continue
            if message["legal"]:
                action = choose(state["view"], message["legal"])
                await socket.send(json.dumps({"type": "act", "table": table, "action": action}))
