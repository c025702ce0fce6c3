"""Fixtures for the records tests: the same tests against SQLite and a real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from blackdrez.server.records.store import RecordsStore

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database: a SQLite file, or a new schema on the session's PostgreSQL
    (dropped after the test)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'records.db'}"
        return
    server = request.getfixturevalue("postgres_server")
    url = server.create_schema()
    yield url
    server.drop_schema(url)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[RecordsStore]:
    """A records store on a fresh database, migrated."""
    store = await RecordsStore.open(database_url)
    yield store
    await store.close()
