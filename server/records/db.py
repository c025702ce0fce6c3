"""One small async database interface over SQLite (aiosqlite) and PostgreSQL (asyncpg).

Theory of operation
-------------------
The records store writes the same SQL for both databases: parameters are written ``$1, $2, ...``
(asyncpg's style; for SQLite they become ``?1, ?2, ...``, which SQLite numbers the same way), and
the schema uses types both understand (``TEXT``, ``BIGINT``, ``DOUBLE PRECISION``, ``BOOLEAN``)
and both dialects' ``INSERT ... ON CONFLICT`` and ``RETURNING``. A row is read by column name
(``row["name"]``) on both. SQLite returns booleans as 0/1: callers wrap them in ``bool``.

:func:`open_database` picks the driver from the URL: ``sqlite:///path/to/file.db`` (or a bare
path) for the embedded default, ``postgresql://...`` for deployments. Both give a
:class:`Database`: ``fetch``/``fetchrow``/``fetchval``/``execute`` run one statement on their own;
``async with db.transaction() as tx`` runs several atomically, and the database's write lock is
taken at the start (SQLite ``BEGIN IMMEDIATE``), so read-then-write inside it never races.

SQLite is one file for one server process: one connection writes (transactions queue on an
asyncio lock, since statements of two transactions on one connection would mix) and a second one
reads, in WAL mode so that readers never wait for the writer. ``synchronous=NORMAL`` in WAL mode
keeps every committed transaction across a crash of the process (not necessarily across a power
loss). PostgreSQL is a pool of connections shared by any number of nodes.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

Dialect = Literal["sqlite", "postgresql"]

SQLITE_BUSY_TIMEOUT_MS = 10_000
"""How long a SQLite statement waits for another process's write lock before failing."""

POOL_SIZE = 10
"""The largest number of PostgreSQL connections one process opens."""


class DatabaseError(Exception):
    """The database cannot be opened or used as configured (bad URL, unknown scheme...)."""


class Row(Protocol):
    """A result row: read by column name or position."""

    def __getitem__(self, key: str | int) -> Any: ...


class Connection(Protocol):
    """What runs a statement: the database itself, or an open transaction."""

    async def execute(self, sql: str, *args: Any) -> None:
        """Run one statement, keeping no result."""
        ...

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        """Run one statement and return every row."""
        ...

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        """Run one statement and return its first row, or ``None``."""
        ...

    async def fetchval(self, sql: str, *args: Any) -> Any:
        """Run one statement and return the first column of its first row, or ``None``."""
        ...


class Database(Connection, Protocol):
    """A database the records store can use (see the module docstring)."""

    dialect: Dialect
    url: str
    """The URL without its password, safe to log."""

    def transaction(self) -> Any:
        """``async with db.transaction() as tx``: statements on ``tx`` commit or roll back."""
        ...

    async def close(self) -> None:
        """Close every connection."""
        ...


_PARAMETER = re.compile(r"\$(\d+)")


@functools.lru_cache(maxsize=512)
def sqlite_sql(sql: str) -> str:
    """``sql`` with ``$n`` parameters written as SQLite's ``?n``."""
    return _PARAMETER.sub(r"?\1", sql)


def redact(url: str) -> str:
    """``url`` without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


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


class _SqliteConnection:
    """Statements on one aiosqlite connection."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    async def execute(self, sql: str, *args: Any) -> None:
        await self._connection.execute(sqlite_sql(sql), args)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        async with self._connection.execute(sqlite_sql(sql), args) as cursor:
            return list(await cursor.fetchall())

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        async with self._connection.execute(sqlite_sql(sql), args) as cursor:
            return await cursor.fetchone()

    async def fetchval(self, sql: str, *args: Any) -> Any:
        row = await self.fetchrow(sql, *args)
        return None if row is None else row[0]


class SqliteDatabase(_SqliteConnection):
    """The embedded database: one file, a writer connection and a reader connection."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: Path, writer: Any, reader: Any) -> None:
        super().__init__(reader)
        self.path = path
        self.url = f"sqlite:///{path}"
        self._writer = writer
        self._write_lock = asyncio.Lock()

    @classmethod
    async def connect(cls, path: Path) -> SqliteDatabase:
        """Open (creating if needed) the database file at ``path``."""
        import aiosqlite

        path.parent.mkdir(parents=True, exist_ok=True)
        connections = []
        try:
            for _ in range(2):
                connection = await aiosqlite.connect(path, isolation_level=None)
                connections.append(connection)
                connection.row_factory = aiosqlite.Row
                await connection.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
                await connection.execute("PRAGMA journal_mode = WAL")
                await connection.execute("PRAGMA synchronous = NORMAL")
                await connection.execute("PRAGMA foreign_keys = ON")
        except Exception as error:
            for connection in connections:
                await connection.close()
            raise DatabaseError(f"cannot open the SQLite database {path}: {error}") from error
        return cls(path, connections[0], connections[1])

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[_SqliteConnection]:
        async with self._write_lock:
            await self._writer.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteConnection(self._writer)
            except BaseException:
                await self._writer.execute("ROLLBACK")
                raise
            await self._writer.execute("COMMIT")

    async def close(self) -> None:
        await self._writer.close()
        await self._connection.close()


class _PostgresConnection:
    """Statements on one asyncpg connection (or the pool, one statement at a time)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    async def execute(self, sql: str, *args: Any) -> None:
        await self._connection.execute(sql, *args)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return list(await self._connection.fetch(sql, *args))

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        return await self._connection.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self._connection.fetchval(sql, *args)


class PostgresDatabase(_PostgresConnection):
    """A PostgreSQL server through a pool of asyncpg connections."""

    dialect: Dialect = "postgresql"

    def __init__(self, url: str, pool: Any) -> None:
        super().__init__(pool)
        self.url = redact(url)
        self._pool = pool

    @classmethod
    async def connect(cls, url: str, pool_size: int = POOL_SIZE) -> PostgresDatabase:
        """Open a pool of connections to ``url``."""
        import asyncpg

        try:
            pool = await asyncpg.create_pool(url, min_size=1, max_size=pool_size)
        except (OSError, asyncpg.PostgresError) as error:
            raise DatabaseError(f"cannot connect to {redact(url)}: {error}") from error
        return cls(url, pool)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[_PostgresConnection]:
        async with self._pool.acquire() as connection, connection.transaction():
            yield _PostgresConnection(connection)

    async def close(self) -> None:
        await self._pool.close()
