"""``blackdrez serve`` as a newcomer runs it: no Redis given, its state in a data folder.

:class:`DefaultServer` runs ``python -m blackdrez.tools.cli serve --port PORT`` in a folder of the
test's
own, with the environment's ``BLACKDREZ_*`` settings removed (the suite's ``BLACKDREZ_DB_URL=none``
among them), so the node keeps its records and its Redis in ``FOLDER/blackdrez-data`` as the
README's first command does. It can be stopped with any signal and started again in the same
folder; :func:`redis_pid` tells whether the folder's Redis (``blackdrez.server.stores.embedded``)
runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0

ENVIRONMENT = {k: v for k, v in os.environ.items() if not k.startswith("BLACKDREZ_")}
"""The test run's environment without the suite's own settings (no records, say): the
server runs with its defaults, as a newcomer's does."""


class DefaultServer:
    """``python -m blackdrez.tools.cli serve --port PORT`` in the folder ``cwd``, as the README runs
    it."""

    def __init__(self, cwd: Path, port: int) -> None:
        self.cwd, self.port = cwd, port
        self.url = f"ws://127.0.0.1:{port}/"
        self.process: subprocess.Popen[bytes] | None = None
        self.first_line = ""
        self.lines: list[str] = []
        """Every line the node printed, over all its starts."""

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def start(self) -> None:
        """Start the node; return once it listens (its first line), its output read on by a
        thread (kept in :attr:`lines`) so that it never blocks on a full pipe."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--port", str(self.port)],
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**ENVIRONMENT, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)},
        )
        listening = asyncio.get_running_loop().create_future()
        loop = asyncio.get_running_loop()
        threading.Thread(
            target=self._read, args=(self.process, loop, listening), daemon=True
        ).start()
        self.first_line = await asyncio.wait_for(listening, START_TIMEOUT)

    def _read(
        self,
        process: subprocess.Popen[bytes],
        loop: asyncio.AbstractEventLoop,
        listening: asyncio.Future[str],
    ) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode(errors="replace")
            self.lines.append(line)
            if line.startswith("blackdrez ") and not listening.done():
                loop.call_soon_threadsafe(_settle, listening, line)
        code = process.wait()
        if listening.done():
            return  # it listened: nobody waits on the future any more (the loop may be closed)
        # (a RuntimeError: the test is over and its loop closed, there is nobody left to tell)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(
                _settle, listening, RuntimeError(f"the server exited before it listened ({code})")
            )

    def stop(self, how: signal.Signals) -> int:
        """Send ``how`` and wait for the exit; return the exit code."""
        assert self.process is not None
        self.process.send_signal(how)
        return self.process.wait(STOP_TIMEOUT)


def _settle(future: asyncio.Future[str], outcome: str | BaseException) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def redis_pid(data: Path) -> int | None:
    """The pid of the data folder's Redis, if its address file names one that runs."""
    try:
        pid = int(json.loads((data / "redis" / "address").read_text())["pid"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError):
        return None
    return pid
