"""The database layer on SQLite and PostgreSQL: write scripts are atomic and serialize."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from blackdrez.server.records.db import Database, Row, Script, open_database, values


class Boom(Exception):
    """Raised by a script half-way through."""


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """An open database with one table, ``counter``, holding ``(name, n)`` rows."""
    database = await open_database(database_url)
    await database.run(_statements("CREATE TABLE counter (name TEXT PRIMARY KEY, n INTEGER)"))
    yield database
    await database.close()


def _statements(*sqls: str) -> Script[None]:
    for sql in sqls:
        yield sql, ()


def _insert_then_fail(name: str) -> Script[None]:
    yield "INSERT INTO counter (name, n) VALUES ($1, $2)", (name, 1)
    raise Boom


def _increment(lock: bool) -> Script[int]:
    rows: list[Row] = yield (
        f"SELECT n FROM counter WHERE name = $1{' FOR UPDATE' if lock else ''}",
        ("c",),
    )
    n = rows[0]["n"] + 1
    yield "UPDATE counter SET n = $1 WHERE name = $2", (n, "c")
    return n


async def test_a_script_that_raises_changes_nothing(db: Database) -> None:
    with pytest.raises(Boom):
        await db.run(_insert_then_fail("a"))
    assert await db.fetchval("SELECT COUNT(*) FROM counter") == 0


async def test_a_statement_that_fails_rolls_back_the_ones_before(db: Database) -> None:
    rows, arguments = values([("a", 1), ("b", 2)])
    script = _statements(
        "INSERT INTO counter (name, n) VALUES ('x', 0)", "INSERT INTO counter VALUES ('x', 1)"
    )
    with pytest.raises(Exception):  # noqa: B017 - each driver raises its own unique violation
        await db.run(script)
    assert await db.fetchval("SELECT COUNT(*) FROM counter") == 0
    assert (rows, arguments) == ("($1, $2), ($3, $4)", ["a", 1, "b", 2])


async def test_concurrent_read_modify_write_scripts_lose_no_update(db: Database) -> None:
    await db.run(_statements("INSERT INTO counter (name, n) VALUES ('c', 0)"))
    lock = db.dialect == "postgresql"  # SQLite's BEGIN IMMEDIATE already serializes writers
    results = await asyncio.gather(*(db.run(_increment(lock)) for _ in range(20)))
    assert sorted(results) == list(range(1, 21))
    assert await db.fetchval("SELECT n FROM counter WHERE name = 'c'") == 20


async def test_a_batch_keeps_the_scripts_before_one_that_raises_and_nothing_of_it(
    db: Database,
) -> None:
    """``run_each``: each script all or nothing, those before a failure kept, none after run
    (SQLite runs the batch in one transaction, a savepoint per script)."""
    batch = [
        _statements("INSERT INTO counter (name, n) VALUES ('a', 1)"),
        _statements("INSERT INTO counter (name, n) VALUES ('b', 2)"),
        _insert_then_fail("c"),
        _statements("INSERT INTO counter (name, n) VALUES ('d', 4)"),
    ]
    results, error = await db.run_each(batch)
    assert results == [None, None] and isinstance(error, Boom)
    names = await db.fetch("SELECT name FROM counter ORDER BY name")
    assert [row["name"] for row in names] == ["a", "b"]
    results, error = await db.run_each(
        [_statements("INSERT INTO counter (name, n) VALUES ('e', 5)") for _ in range(2)]
    )  # the second breaks the key: the first is kept
    assert results == [None] and error is not None
    assert await db.fetchval("SELECT COUNT(*) FROM counter") == 3


def _writer_settings() -> Script[dict[str, object]]:
    found: dict[str, object] = {}
    for name in ("journal_mode", "synchronous", "cache_size", "wal_autocheckpoint"):
        rows: list[Row] = yield f"PRAGMA {name}", ()
        found[name] = rows[0][0]
    return found


async def test_the_sqlite_writer_is_durable_and_checkpoints_seldom(tmp_path) -> None:
    """SQLite's writer: WAL, ``synchronous=NORMAL`` (a commit survives the process's crash), a
    32 MiB page cache and a checkpoint every 10,000 WAL pages (the records' process's largest
    cost is SQLite's: `docs/benchmarks.md`, "Records under load")."""
    database = await open_database(f"sqlite:///{tmp_path / 'records.db'}")
    try:
        assert await database.run(_writer_settings()) == {
            "journal_mode": "wal",
            "synchronous": 1,
            "cache_size": -32768,
            "wal_autocheckpoint": 10000,
        }
    finally:
        await database.close()
