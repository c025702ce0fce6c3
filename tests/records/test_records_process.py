"""The records writer in a process of its own: every game stored once, in order, whatever
happens to the process (``blackdrez.server.records.process``)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blackdrez.server.app import GameServer
from blackdrez.server.metrics import Metrics
from blackdrez.server.records.process import RecordsProcess
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.records.writer import RecordsWriter
from blackdrez.server.settings import Settings
from blackdrez.server.table.room import GameOver
from tests.records.test_writer import _stored_ids, game_over


@pytest.fixture
async def records(tmp_path: Path) -> AsyncIterator[tuple[RecordsStore, RecordsProcess]]:
    """A SQLite file's store (the node's, for reads) and a started records process on it."""
    url = f"sqlite:///{tmp_path / 'records.db'}"
    store = await RecordsStore.open(url)
    process = RecordsProcess(store, url, Metrics())
    await process.start()
    yield store, process
    await process.stop()
    await store.close()


async def rated_once_in_order(store: RecordsStore, games: list[GameOver]) -> None:
    """Each of ``games`` (all played by p0) changed p0's rating once, in the order given."""
    rows = await store.db.fetch(
        "SELECT game_id, mu_before, sigma_before, mu, sigma FROM rating_history WHERE player = 'p0'"
    )
    assert sorted(row["game_id"] for row in rows) == sorted(game.game_id for game in games)
    points = {row["game_id"]: row for row in rows}
    for before, after in itertools.pairwise(points[game.game_id] for game in games):
        assert (after["mu_before"], after["sigma_before"]) == (before["mu"], before["sigma"])


async def test_games_sent_to_the_records_process_are_stored_once_in_order(
    records: tuple[RecordsStore, RecordsProcess], caplog: pytest.LogCaptureFixture
) -> None:
    """Games submitted in several calls are stored by the child, in order, and acknowledged:
    ``written`` returns, the counts and metrics are the node's. A game that does not verify is
    dropped, and the child's error reaches the node's log; games submitted again (a failover's
    replay) are stored already."""
    store, process = records
    games = [game_over(f"t{i % 3}", i // 3 + 1) for i in range(30)]
    unfinished = game_over("bad", 1)
    process.submit(games[:10])
    process.submit([dataclasses.replace(unfinished, actions=unfinished.actions[:-5])])
    process.submit(games[10:])
    for table in ("t0", "t1", "t2", "bad"):
        assert await process.written(table, timeout=60), table
    assert (process.written_count, process.failures, process.restarts) == (30, 0, 0)
    assert "game bad:1 cannot be recorded" in caplog.text
    process.submit(games[:6])
    for table in ("t0", "t1", "t2"):
        assert await process.written(table, timeout=60), table
    assert process.written_count == 30
    assert await _stored_ids(store) == [f"t{t}:{n}" for t in range(3) for n in range(1, 11)]
    await rated_once_in_order(store, games)
    assert process.metrics is not None
    assert process.metrics.records_written._value.get() == 30
    assert process.metrics.records_pending._value.get() == 0
    assert not process.catching_up


async def test_a_killed_records_process_is_replaced_and_every_game_stored_once(
    records: tuple[RecordsStore, RecordsProcess],
) -> None:
    """The child is killed after it stored some of the games, before the rest: another one is
    started, sent every game not acknowledged, and each game is stored (and rated) once, in the
    order they ended."""
    store, process = records
    games = [game_over(f"t{i % 8}", i // 8 + 1) for i in range(320)]
    process.submit(games)
    async with asyncio.timeout(60):
        while process._unstored == len(games):
            await asyncio.sleep(0.005)
    assert process._unstored, "every game was stored before the kill: submit more"
    killed = process.pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    for table in {f"t{i}" for i in range(8)}:
        assert await process.written(table, timeout=120), table
    assert process.restarts == 1 and process.pid != killed
    assert await store.db.fetchval("SELECT count(*) FROM games") == len(games)
    await rated_once_in_order(store, games)
    assert process.written_count <= len(games)  # stored, not acknowledged: counted by none


async def test_stopping_the_records_process_stores_what_is_queued(
    records: tuple[RecordsStore, RecordsProcess],
) -> None:
    store, process = records
    games = [game_over("t1", n) for n in range(1, 41)]
    process.submit(games)
    await process.stop()
    assert process.written_count == len(games) and process._unstored == 0
    assert await _stored_ids(store) == [game.game_id for game in games]
    assert process.pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(process.pid, 0)  # exited, and reaped


@pytest.mark.parametrize("in_process", [False, True])
async def test_a_node_writes_its_records_in_a_process_unless_told_otherwise(
    tmp_path: Path, in_process: bool
) -> None:
    server = GameServer(
        Settings(
            port=0,
            ping_interval=None,
            db_url=f"sqlite:///{tmp_path / 'records.db'}",
            records_in_process=in_process,
        )
    )
    await server.start()
    try:
        kind = RecordsWriter if in_process else RecordsProcess
        assert isinstance(server.writer, kind)
    finally:
        await server.stop()


async def test_a_database_the_records_process_cannot_open_yet_is_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A node may start while its database is unreachable: the child keeps the games, says
    each failure as a failed write and counts it, and stores them once it can open the
    database, without exiting (a child that exited for it was started again and again)."""
    later = tmp_path / "later"
    later.write_text("a file where the database's folder should be: it cannot be opened")
    url = f"sqlite:///{later / 'records.db'}"
    reads = await RecordsStore.open(f"sqlite:///{tmp_path / 'reads.db'}")
    process = RecordsProcess(reads, url, Metrics())
    await process.start()
    try:
        games = [game_over("t0", n) for n in range(1, 4)]
        process.submit(games)
        for _ in range(100):
            if process.failures >= 2:
                break
            await asyncio.sleep(0.1)
        assert process.failures >= 2 and process.restarts == 0
        assert "storing game t0:1 failed, will retry" in caplog.text
        later.unlink()  # the database can be made now
        assert await process.written("t0", timeout=60)
        assert process.written_count == 3 and process.restarts == 0
    finally:
        await process.stop()
        await reads.close()
    written = await RecordsStore.open(url)
    try:
        assert await _stored_ids(written) == ["t0:1", "t0:2", "t0:3"]
    finally:
        await written.close()
