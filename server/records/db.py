"""One small async database interface over SQLite and PostgreSQL (asyncpg).

Theory of operation
-------------------
The records store writes the same SQL for both databases: parameters are written ``$1, $2, ...``
(asyncpg's style; for SQLite they become ``?1, ?2, ...``, which SQLite numbers the same way), and
the schema uses types both understand (``TEXT``, ``BIGINT``, ``DOUBLE PRECISION``, ``BOOLEAN``)
and both dialects' ``INSERT ... ON CONFLICT`` and ``RETURNING``. A row is read by column name
(``row["name"]``) on both. SQLite returns booleans as 0/1: callers wrap them in ``bool``.

Reads are single statements: ``fetch``, ``fetchrow``, ``fetchval``. Writes are *scripts*, in the
sans-I/O style: a generator that yields ``(sql, args)`` statements, receives each one's rows, and
returns its result; :meth:`Database.run` runs a script in one transaction and commits it, or
rolls it back if the script raises. A script holds the write's logic once for both databases,
and each driver runs it the cheapest way it can:

* SQLite runs the whole script synchronously on one writer thread (``sqlite3``), inside
  ``BEGIN IMMEDIATE`` (the write lock, taken first: read-then-write never races): one hop from
  the event loop per transaction instead of one per statement, which costs more than the
  statements themselves (measured: about three times the throughput). Reads go through a second
  connection, ``aiosqlite``'s, in WAL mode so that readers never wait for the writer.
  ``synchronous=NORMAL`` keeps every committed transaction across a crash of the process (not
  necessarily across a power loss). One process owns the file.
* PostgreSQL runs the script's statements one by one on a pooled connection inside a
  transaction; any number of nodes share the server. :meth:`Database.run_each` (the records
  writer's batches) runs on a thread with an event loop and a connection of its own: each
  statement is a round trip, and on the node's loop each would wait for a turn of it, which on
  a node at full speed kept a batch of games from being written while the load lasted.

:func:`open_database` picks the driver from the URL: ``sqlite:///path/to/file.db`` (or a bare
path) for the embedded default, ``postgresql://...`` for deployments.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import sqlite3
import threading
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

Dialect = Literal["sqlite", "postgresql"]

SQLITE_BUSY_TIMEOUT_MS = 10_000
"""How long a SQLite statement waits for another connection's write lock before failing."""

POOL_SIZE = 10
"""The largest number of PostgreSQL connections one process opens."""

T = TypeVar("T")


class Row(Protocol):
    """A result row: read by column name or position."""

    def __getitem__(self, key: str | int) -> Any: ...


Statement = tuple[str, Sequence[Any]]
Script = Generator[Statement, list[Row], T]
"""A write: yields statements, receives each one's rows, returns its result."""


class DatabaseError(Exception):
    """The database cannot be opened or used as configured (bad URL, unknown scheme...)."""


class Database(Protocol):
    """A database the records store can use (see the module docstring)."""

    dialect: Dialect
    url: str
    """The URL without its password, safe to log."""

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        """Run one read statement and return every row."""
        ...

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        """Run one read statement and return its first row, or ``None``."""
        ...

    async def fetchval(self, sql: str, *args: Any) -> Any:
        """Run one read statement; the first column of its first row, or ``None``."""
        ...

    async def run(self, script: Script[T]) -> T:
        """Run a write script in one transaction; return its result (see the module doc)."""
        ...

    async def run_each(self, scripts: Sequence[Script[T]]) -> tuple[list[T], Exception | None]:
        """Run ``scripts`` in order, each in a transaction of its own, stopping at the first
        that raises: the results of those before it, and its error (``None`` if none failed).
        One hop to the writer thread for all of them (SQLite)."""
        ...

    async def close(self) -> None:
        """Close every connection."""
        ...


_PARAMETER = re.compile(r"\$(\d+)")


@functools.lru_cache(maxsize=512)
def sqlite_sql(sql: str) -> str:
    """``sql`` with ``$n`` parameters written as SQLite's ``?n``."""
    return _PARAMETER.sub(r"?\1", sql)


def values(rows: Sequence[Sequence[Any]], start: int = 1) -> tuple[str, list[Any]]:
    """A multi-row ``VALUES`` list numbered from ``$start``, and its arguments in order."""
    groups = []
    arguments: list[Any] = []
    for row in rows:
        first = start + len(arguments)
        groups.append("(" + ", ".join(f"${n}" for n in range(first, first + len(row))) + ")")
        arguments.extend(row)
    return ", ".join(groups), arguments


def redact(url: str) -> str:
    """``url`` without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL or a bare path, else ``None`` (not SQLite).

    As in SQLAlchemy: ``sqlite:///records.db`` is relative, ``sqlite:////var/db/records.db``
    absolute.
    """
    if url.startswith("sqlite:"):
        if not url.startswith("sqlite:///") or url == "sqlite:///":
            raise DatabaseError(f"a SQLite URL is sqlite:///FILE, not {url!r}")
        return Path(url.removeprefix("sqlite:///"))
    if "://" in url:
        return None
    return Path(url)


async def open_database(url: str) -> Database:
    """Connect to the database at ``url`` (see the module docstring); raises ``DatabaseError``."""
    scheme = urlsplit(url).scheme
    if scheme in ("postgresql", "postgres"):
        return await PostgresDatabase.connect(url)
    path = sqlite_path(url)
    if path is None:
        raise DatabaseError(
            f"unknown database URL scheme {scheme!r}: use postgresql://... or sqlite:///path"
        )
    return await SqliteDatabase.connect(path)


_SQLITE_SETTINGS = (
    f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}",
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
)
_SQLITE_WRITER_SETTINGS = (
    *_SQLITE_SETTINGS,
    "PRAGMA cache_size = -32768",
    "PRAGMA wal_autocheckpoint = 10000",
)
"""The writer's own: a 32 MiB page cache (the default's 2 MiB held few of the pages every game
touches: the games' and players' indexes, the stats and ratings), and a checkpoint every
10,000 pages written to the WAL rather than every 1,000 (a page that many commits rewrite is
copied back into the file once per checkpoint). Measured (2026-12-07, 4,000 games written 20 to
a transaction, process CPU, medians of 3): 878 -> 793 and 889 -> 751 µs a game (two sittings of
a slow hour; 412 -> 360 in a faster one, with a 64 MiB cache): the records' largest cost."""


class SqliteDatabase:
    """The embedded database: one file, a writer thread and an ``aiosqlite`` reader."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: Path, writer: sqlite3.Connection, thread: Any, reader: Any) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self._writer = writer
        self._thread = thread
        self._reader = reader

    @classmethod
    async def connect(cls, path: Path) -> SqliteDatabase:
        """Open (creating if needed) the database file at ``path``."""
        import aiosqlite

        path.parent.mkdir(parents=True, exist_ok=True)
        thread = ThreadPoolExecutor(1, thread_name_prefix="records-sqlite-writer")
        loop = asyncio.get_running_loop()

        def open_writer() -> sqlite3.Connection:
            connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            connection.row_factory = sqlite3.Row
            for pragma in _SQLITE_WRITER_SETTINGS:
                connection.execute(pragma)
            return connection

        try:
            writer = await loop.run_in_executor(thread, open_writer)
            reader = await aiosqlite.connect(path, isolation_level=None)
        except (sqlite3.Error, OSError) as error:
            thread.shutdown()
            raise DatabaseError(f"cannot open the SQLite database {path}: {error}") from error
        reader.row_factory = aiosqlite.Row
        for pragma in _SQLITE_SETTINGS:
            await reader.execute_fetchall(pragma)
        return cls(path, writer, thread, reader)

    # One hop to aiosqlite's thread per read (execute_fetchall): a cursor's execute, fetch and
    # close would be three.
    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return list(await self._reader.execute_fetchall(sqlite_sql(sql), args))

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        rows = await self._reader.execute_fetchall(sqlite_sql(sql), args)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, *args: Any) -> Any:
        row = await self.fetchrow(sql, *args)
        return None if row is None else row[0]

    async def run(self, script: Script[T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._run_here, script)

    async def run_each(self, scripts: Sequence[Script[T]]) -> tuple[list[T], Exception | None]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._run_each_here, scripts)

    def _run_each_here(self, scripts: Sequence[Script[T]]) -> tuple[list[T], Exception | None]:
        """The scripts in one transaction, each within a savepoint of its own: one that raises
        is rolled back alone, and those before it are committed. One commit for the batch
        instead of one per script: each commit writes every page it changed to the WAL (the
        games' tables and indexes, the players, the ratings), the same pages for every game of
        a batch."""
        if len(scripts) == 1:
            try:
                return [self._run_here(scripts[0])], None
            except Exception as error:
                return [], error
        connection = self._writer
        results: list[T] = []
        failure: Exception | None = None
        connection.execute("BEGIN IMMEDIATE")
        try:
            for script in scripts:
                connection.execute("SAVEPOINT script")
                try:
                    results.append(_run_script(connection, script))
                except Exception as error:
                    connection.execute("ROLLBACK TO script")
                    failure = error
                    break
                finally:
                    connection.execute("RELEASE script")
            connection.execute("COMMIT")
        except BaseException as error:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            if not isinstance(error, Exception):
                raise
            return [], error  # nothing committed
        return results, failure

    def _run_here(self, script: Script[T]) -> T:
        """Run ``script`` on the writer thread, in one transaction."""
        connection = self._writer
        connection.execute("BEGIN IMMEDIATE")
        try:
            result = _run_script(connection, script)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        return result

    async def close(self) -> None:
        await self._reader.close()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._writer.close)
        self._thread.shutdown()


def _run_script(connection: sqlite3.Connection, script: Script[T]) -> T:
    """Run ``script``'s statements on ``connection`` (in the transaction it is in)."""
    try:
        statement = next(script)
        while True:
            sql, args = statement
            rows = connection.execute(sqlite_sql(sql), tuple(args)).fetchall()
            statement = script.send(rows)
    except StopIteration as done:
        return done.value


class PostgresDatabase:
    """A PostgreSQL server through a pool of asyncpg connections, and a writer thread."""

    dialect: Dialect = "postgresql"

    def __init__(self, url: str, pool: Any, writer: PostgresWriter) -> None:
        self.url = redact(url)
        self._pool = pool
        self._writer = writer

    @classmethod
    async def connect(cls, url: str, pool_size: int = POOL_SIZE) -> PostgresDatabase:
        """Open a pool of connections to ``url``."""
        import asyncpg

        try:
            pool = await asyncpg.create_pool(url, min_size=1, max_size=pool_size)
        except (OSError, asyncpg.PostgresError) as error:
            raise DatabaseError(f"cannot connect to {redact(url)}: {error}") from error
        return cls(url, pool, PostgresWriter(url))

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return list(await self._pool.fetch(sql, *args))

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        return await self._pool.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self._pool.fetchval(sql, *args)

    async def run(self, script: Script[T]) -> T:
        async with self._pool.acquire() as connection:
            return await _run_in_transaction(connection, script)

    async def run_each(self, scripts: Sequence[Script[T]]) -> tuple[list[T], Exception | None]:
        return await self._writer.run_each(scripts)

    async def close(self) -> None:
        await asyncio.to_thread(self._writer.close)
        await self._pool.close()


async def _run_in_transaction(connection: Any, script: Script[T]) -> T:
    """Run ``script`` on an asyncpg ``connection`` in one transaction."""
    async with connection.transaction():
        try:
            statement = next(script)
            while True:
                sql, args = statement
                statement = script.send(list(await connection.fetch(sql, *args)))
        except StopIteration as done:
            return done.value


class PostgresWriter:
    """A thread with an event loop and one PostgreSQL connection of its own, for batches of
    write scripts (see the module docstring). The connection is opened on first use and again
    after a failure."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="records-postgres-writer", daemon=True
        )
        self._thread.start()
        self._connection: Any = None

    async def run_each(self, scripts: Sequence[Script[T]]) -> tuple[list[T], Exception | None]:
        """:meth:`Database.run_each` on the writer's thread."""
        if not self._thread.is_alive():
            raise DatabaseError("the records writer is closed")
        done = asyncio.run_coroutine_threadsafe(self._run_each(scripts), self._loop)
        return await asyncio.wrap_future(done)

    async def _run_each(self, scripts: Sequence[Script[T]]) -> tuple[list[T], Exception | None]:
        import asyncpg

        if self._connection is None or self._connection.is_closed():
            try:
                self._connection = await asyncpg.connect(self._url)
            except (OSError, asyncpg.PostgresError) as error:
                return [], error
        results: list[T] = []
        for script in scripts:
            try:
                results.append(await _run_in_transaction(self._connection, script))
            except Exception as error:
                if not isinstance(error, asyncpg.PostgresError):
                    self._drop_connection()  # the link itself failed: a new one next time
                return results, error
        return results, None

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.terminate()

    def close(self) -> None:
        """Close the connection and end the thread (blocking: call it off the event loop)."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(5.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self._loop.close()

    async def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close(timeout=2.0)
