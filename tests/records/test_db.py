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
