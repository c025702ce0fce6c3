"""What every launcher of this package shares: ``with`` starts it and stops it for good.

Theory of operation
-------------------
A launcher (a Redis server, a Redis Cluster, a PostgreSQL cluster, a node process) is started by
the caller and must be stopped whatever happens, so that a test or benchmark that fails half-way
leaves nothing running. :class:`Launcher` gives each the same context-manager protocol over its
own ``start`` and ``close``; :class:`OneProcess` is a launcher of one OS process and adds what it
answers about it (its pid while it runs, and whether it runs).
"""

from __future__ import annotations

import signal
import subprocess
from types import TracebackType
from typing import Self


class Launcher:
    """A part that ``with`` starts (:meth:`start`) and stops for good (:meth:`close`)."""

    def start(self) -> None:
        """Start the part and wait until it serves."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the part for good and delete what it owns."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class OneProcess(Launcher):
    """A launcher of one OS process, kept in ``_process`` while it exists."""

    _process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The process's id while it runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def running(self) -> bool:
        """True while the process is alive (paused counts as alive)."""
        return self._process is not None and self._process.poll() is None


def stop_process(process: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """Stop ``process`` if it runs: SIGCONT (a paused process cannot act on SIGTERM), SIGTERM,
    then SIGKILL if it lingers past ``timeout`` seconds; return once it has exited."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGCONT)
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
