"""A real PostgreSQL server for tests and benchmarks, on a free loopback port, in a throwaway data
directory.

It runs Debian's ``postgresql`` package (``/usr/lib/postgresql/<version>/bin``; ``.ci/run``
installs it) or ``initdb``/``pg_ctl`` from PATH. PostgreSQL refuses to run as root, and tests run
as root in CI: then the server runs as the unprivileged ``postgres`` user that the package
creates (the data directory is handed to it). The cluster trusts local connections and has one
superuser, ``test``; :meth:`PostgresServer.create_schema` gives each test a fresh schema
(:meth:`~PostgresServer.create_database` a fresh database).

``durable=False`` (the default for tests) turns off fsync: a test never survives a power loss,
and the suite runs faster. Benchmarks pass ``durable=True`` to measure what a deployment gets.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from blackdrez.server.testing.launcher import Launcher
from blackdrez.server.testing.redis_server import free_port

START_TIMEOUT = 60
STOP_TIMEOUT = 30
SUPERUSER = "test"
UNPRIVILEGED_USER = "postgres"


def find_postgres_bin() -> Path:
    """The folder holding ``initdb`` and ``pg_ctl``: Debian's newest, else PATH's."""
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    if debian:
        return debian[-1].parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    raise RuntimeError(
        "no PostgreSQL server binaries: install Debian's package (apt-get install postgresql; "
        ".ci/run does) or put initdb and pg_ctl on PATH"
    )


class PostgresServer(Launcher):
    """One throwaway PostgreSQL cluster (see the module docstring)."""

    def __init__(
        self,
        *,
        durable: bool = False,
        bind: str = "127.0.0.1",
        wrap: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        """``bind``: the address it listens on and its URLs name; ``wrap``: how its commands
        are run (in a network namespace: ``server.testing.netns.Host.wrap``), by default as
        they are. A server bound elsewhere than loopback trusts connections from anywhere
        (it is a test's, on a private network)."""
        self.bin = find_postgres_bin()
        self.durable = durable
        self.bind = bind
        self.wrap = wrap
        self.user = UNPRIVILEGED_USER if os.geteuid() == 0 else None
        self._dir = tempfile.TemporaryDirectory(prefix="bd-postgres-")
        self.data_dir = Path(self._dir.name) / "data"
        self.port = free_port()
        self._databases = 0
        self._started = False

    def url(self, database: str = "postgres") -> str:
        """The ``postgresql://`` URL of ``database`` on this server."""
        return f"postgresql://{SUPERUSER}@{self.bind}:{self.port}/{database}"

    def start(self) -> None:
        """Create the cluster (unless it exists: a server stopped before) and start the
        server; return once it accepts connections."""
        if self._started:
            return
        root = Path(self._dir.name)
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        if not (self.data_dir / "PG_VERSION").exists():  # (else started again after a stop)
            self._run(
                "initdb", "-D", str(self.data_dir), "-A", "trust", "-U", SUPERUSER,
                "-E", "UTF8", "--locale", "C", "--no-sync",
            )  # fmt: skip
            if self.bind != "127.0.0.1":
                with (self.data_dir / "pg_hba.conf").open("a") as hba:
                    hba.write("host all all 0.0.0.0/0 trust\n")
        settings = [
            f"-p {self.port}",
            f"-k {root}",
            f"-c listen_addresses={self.bind}",
            "-c max_connections=100",
        ]
        if not self.durable:
            settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run(
            "pg_ctl", "-D", str(self.data_dir), "-l", str(root / "server.log"),
            "-o", " ".join(settings), "-w", "-t", str(START_TIMEOUT), "start",
        )  # fmt: skip
        self._started = True

    def create_database(self) -> str:
        """Create a fresh, empty database and return its URL."""
        self._databases += 1
        name = f"test_{self._databases}"
        self._psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def _psql(self, sql: str) -> None:
        self._run("psql", "-h", self.bind, "-p", str(self.port), "-U", SUPERUSER,
                  "-d", "postgres", "-q", "-c", sql)  # fmt: skip

    def create_schema(self) -> str:
        """Create a fresh, empty schema and return a URL whose connections use it (the
        ``search_path`` query parameter): as separate as a database for the store's tables, and
        made in milliseconds where a database takes half a second."""
        self._databases += 1
        name = f"test_{self._databases}"
        self._psql(f"CREATE SCHEMA {name}")
        return f"{self.url()}?search_path={name}"

    def drop_schema(self, url: str) -> None:
        """Drop a schema made by :meth:`create_schema`, with everything in it."""
        self._psql(f"DROP SCHEMA IF EXISTS {url.rsplit('=', 1)[-1]} CASCADE")

    def stop(self) -> None:
        """Stop the server (fast shutdown) if it runs."""
        if not self._started:
            return
        self._started = False
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w",
                  "-t", str(STOP_TIMEOUT), "stop")  # fmt: skip

    def crash(self) -> None:
        """Stop the server as a crash would (immediate shutdown: no checkpoint, every
        connection cut); :meth:`start` recovers it from its write-ahead log."""
        if not self._started:
            return
        self._started = False
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w",
                  "-t", str(STOP_TIMEOUT), "stop")  # fmt: skip

    def close(self) -> None:
        """Stop the server and delete the cluster."""
        try:
            self.stop()
        finally:
            self._dir.cleanup()

    def _run(self, program: str, *args: str) -> None:
        executable = self.bin / program
        command = [str(executable if executable.exists() else program), *args]
        user = self.user
        if self.wrap is not None:  # (entering a namespace needs root: the user is changed after)
            command = self.wrap([*(["runuser", "-u", user, "--"] if user else []), *command])
            user = None
        result = subprocess.run(
            command,
            user=user,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
            check=False,
        )
        if result.returncode != 0:
            log = Path(self._dir.name) / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}"
                f"{result.stderr}{tail}"
            )
