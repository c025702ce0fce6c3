"""The records writer: a node's finished games stored in order, in batches, exactly once."""

from __future__ import annotations

import asyncio
import functools
import itertools
import pickle
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import asyncpg
import pytest

from blackdrez.games import verify
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.server.metrics import Metrics
from blackdrez.server.records.db import DatabaseError, Script, T
from blackdrez.server.records.process import HEADER, frame
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.records.writer import (
    BUSY_BATCH,
    CATCH_UP_SWITCH_INTERVAL,
    MAX_BATCH,
    RETIRE_WAIT,
    RecordsWriter,
    finished,
)
from blackdrez.server.table.room import GameOver
from blackdrez.server.testing.postgres_server import PostgresServer


@functools.cache
def _bot_game(seed: str) -> tuple[Any, list[tuple[int, Any]]]:
    """A finished 4-seat BlackDrez engine played by the reference bots, and its actions."""
    return verify.bots_game("blackdrez", seed, blackdrez.Config(seats=4))


def game_over(table: str, n: int, rated: bool = True) -> GameOver:
    """The ``n``-th game of ``table``: the same bot game each time, played by p0..p3."""
    engine, actions = _bot_game("writer")
    return GameOver(
        game_id=f"{table}:{n}",
        engine=engine,
        actions=actions,
        players=[(seat, f"p{seat}", f"P{seat}", False) for seat in range(4)],
        started_at=1_700_000_000.0 + n,
        ended_at=1_700_000_060.0 + n,
        rated=rated,
    )


class CountingDatabase:
    """The store's database, counting the calls that write, and failing some on request."""

    def __init__(self, db: Any) -> None:
        self._db = db
        self.calls = 0
        self.fail_after: int | None = None
        """Fail the next write call after this many of its scripts ran (then write normally)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    async def run(self, script: Script[T]) -> T:
        self.calls += 1
        return await self._db.run(script)

    async def run_each(self, scripts: Sequence[Script[T]]) -> tuple[list[T], Exception | None]:
        self.calls += 1
        if self.fail_after is None:
            return await self._db.run_each(scripts)
        ran, _ = await self._db.run_each(scripts[: self.fail_after])
        self.fail_after = None
        return ran, ConnectionError("the database went away")


@pytest.fixture
def counted(store: RecordsStore) -> Iterator[CountingDatabase]:
    counting = CountingDatabase(store.db)
    store.db = counting  # type: ignore[assignment]
    yield counting
    store.db = counting._db


async def _stored_ids(store: RecordsStore) -> list[str]:
    summaries, _ = await store.games(limit=100)
    return sorted((s.id for s in summaries), key=lambda i: (i.split(":")[0], int(i.split(":")[1])))


def _hog_the_loop(slice_seconds: float, hold_gil: bool = False) -> Callable[[], None]:
    """Keep the event loop as busy as a node at full speed: every turn runs ``slice_seconds``
    of other work, asleep (the GIL given up) or, with ``hold_gil``, computing as a node at its
    maximum does, the GIL held throughout. Returns what stops it."""
    loop = asyncio.get_running_loop()

    def busy() -> None:
        nonlocal handle
        if hold_gil:
            end = time.perf_counter() + slice_seconds
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(slice_seconds)
        handle = loop.call_soon(busy)

    handle = loop.call_soon(busy)
    return lambda: handle.cancel()


def test_a_game_sent_to_the_records_process_makes_the_same_record() -> None:
    """A finished game crosses to the records process pickled (``records.process.frame``), its
    actions as one MessagePack of their wire forms: the game read there makes the same
    verified record as the node's own, and pickles the same way again (a node that adopts a
    table sends its games once more)."""
    game = game_over("t1", 3)
    sent = pickle.loads(frame(game)[HEADER.size :])
    assert all(isinstance(action, dict) for _, action in sent.actions)
    assert finished(sent) == finished(game)
    assert finished(pickle.loads(pickle.dumps(sent))) == finished(game)


async def test_a_backlog_is_written_in_a_few_database_calls(
    store: RecordsStore, counted: CountingDatabase
) -> None:
    """Finished games that pile up between the writer's turns are built, verified and written
    together (one database call per batch), not one game per hop."""
    writer = RecordsWriter(store)
    writer.start()
    try:
        writer.submit([game_over(f"t{i % 10}", i // 10 + 1) for i in range(100)])
        async with asyncio.timeout(60):
            for table in {f"t{i}" for i in range(10)}:
                assert await writer.written(table, timeout=60)
    finally:
        await writer.stop()
    assert writer.written_count == 100
    assert counted.calls <= 3, f"{counted.calls} database calls for 100 games"
    assert len(await _stored_ids(store)) == 100


async def test_a_busy_writer_gathers_longer_and_a_quiet_one_stores_at_once(
    store: RecordsStore, counted: CountingDatabase
) -> None:
    """After a batch of ``BUSY_BATCH`` games or more the writer waits ``busy_gather`` for the
    next games (a busy node's games in fewer, larger transactions); after a small batch it waits
    ``gather`` only (a quiet node's game is stored at once)."""
    writer = RecordsWriter(store, gather=0.01, busy_gather=1.0)
    writer.start()
    try:
        writer.submit([game_over("first", n) for n in range(1, BUSY_BATCH + 1)])
        assert await writer.written("first", timeout=60)
        calls = counted.calls
        for n in range(1, BUSY_BATCH + 1):  # one game every 20 ms: one batch, not sixteen
            writer.submit([game_over("trickle", n)])
            await asyncio.sleep(0.02)
        assert await writer.written("trickle", timeout=60)
        assert counted.calls - calls == 1
        started = time.monotonic()
        writer.submit([game_over("late", 1)])  # still busy: gathered for the busy interval
        assert await writer.written("late", timeout=60)
        assert time.monotonic() - started >= 0.9
        started = time.monotonic()
        writer.submit([game_over("quiet", 1)])  # after a batch of one: stored at once
        assert await writer.written("quiet", timeout=60)
        assert time.monotonic() - started < 0.5
    finally:
        await writer.stop()
    assert writer.written_count == 2 * BUSY_BATCH + 2


async def test_a_stopping_writer_stores_what_it_gathers_at_once(store: RecordsStore) -> None:
    """A writer waiting for more games to store with those it has stops waiting when it is
    stopped: a stopping node stores its last games at once, not a gathering interval later."""
    writer = RecordsWriter(store, gather=30.0)
    writer.start()
    writer.submit([game_over("last", 1)])
    await asyncio.sleep(0.05)  # (the writer took the game and gathers)
    started = time.monotonic()
    await writer.stop()
    assert time.monotonic() - started < 5.0
    assert writer.written_count == 1
    assert await _stored_ids(store) == ["last:1"]


async def test_the_writer_keeps_up_with_a_node_whose_every_loop_turn_is_busy(
    database_url: str,
) -> None:
    """A node at full speed: every turn of its event loop runs 10 ms of other work, and it
    finishes games faster than one per turn. The writes run off that loop, a batch per hop
    (SQLite: on its writer thread; PostgreSQL: on a thread with a loop and a connection of its
    own), so 100 games are stored in well under the time a table waits at retirement (one game
    per hop took 3-4 turns each on SQLite, 4 s; on PostgreSQL a turn per statement, more than
    the 10 s a table waits)."""
    store = await RecordsStore.open(database_url)
    writer = RecordsWriter(store)
    writer.start()
    stop_hogging = _hog_the_loop(0.01)
    try:
        started = time.monotonic()
        writer.submit([game_over(f"t{i % 10}", i // 10 + 1) for i in range(100)])
        for table in {f"t{i}" for i in range(10)}:
            assert await writer.written(table, timeout=RETIRE_WAIT)
        took = time.monotonic() - started
    finally:
        stop_hogging()
        await writer.stop()
        await store.close()
    assert writer.written_count == 100
    assert took < 3.0, f"100 games took {took:.1f} s to store"  # one game per hop: 4.2 s here


async def test_the_writer_keeps_up_with_a_loop_that_never_gives_the_gil_up(
    database_url: str,
) -> None:
    """The writer's threads take the GIL back after every statement and read; a loop running
    Python non-stop hands it over only at the switch interval (5 ms), so 100 games took 35 s to
    store on PostgreSQL and 45 s on SQLite, longer than a closing table waits for them. Behind,
    the writer shortens the interval until it has caught up: they are stored in time."""
    store = await RecordsStore.open(database_url)
    writer = RecordsWriter(store)
    writer.start()
    stop_hogging = _hog_the_loop(0.01, hold_gil=True)
    try:
        writer.submit([game_over(f"t{i % 10}", i // 10 + 1) for i in range(100)])
        for table in {f"t{i}" for i in range(10)}:
            assert await writer.written(table, timeout=RETIRE_WAIT), f"{table} not stored in time"
    finally:
        stop_hogging()
        await writer.stop()
        await store.close()
    assert writer.written_count == 100


async def test_a_writer_behind_gets_the_gil_sooner_until_it_has_caught_up(
    store: RecordsStore,
) -> None:
    """More than a batch of games not stored: the process's GIL switch interval is shortened
    (and the metric says so) until the writer has caught up, then it is what it was. A small
    backlog leaves it alone: a short interval costs the event loop when nothing is behind."""
    before = sys.getswitchinterval()
    metrics = Metrics()
    writer = RecordsWriter(store, metrics)
    writer.start()
    try:
        writer.submit([game_over("small", n) for n in range(1, 11)])
        assert not writer.catching_up and sys.getswitchinterval() == before
        assert await writer.written("small", timeout=60)
        writer.submit([game_over("big", n) for n in range(1, MAX_BATCH + 2)])
        assert writer.catching_up
        assert sys.getswitchinterval() == CATCH_UP_SWITCH_INTERVAL
        assert metrics.records_catching_up._value.get() == 1
        assert await writer.written("big", timeout=60)
        assert not writer.catching_up and sys.getswitchinterval() == before
        assert metrics.records_catching_up._value.get() == 0
        writer.submit([game_over("again", n) for n in range(1, MAX_BATCH + 2)])
        assert sys.getswitchinterval() == CATCH_UP_SWITCH_INTERVAL
    finally:
        await writer.stop()
    assert sys.getswitchinterval() == before, "a stopped writer gives the interval back"
    assert writer.written_count == 10 + 2 * (MAX_BATCH + 1)


async def test_a_failed_write_is_retried_from_the_game_it_stopped_at_in_order_exactly_once(
    store: RecordsStore, counted: CountingDatabase
) -> None:
    """The database fails in the middle of a batch: the games before the failure are stored,
    the rest are tried again from the one that failed, in the order they ended; nothing is
    stored twice, and a game already stored (a failover's replay) is not counted again."""
    writer = RecordsWriter(store)
    writer.start()
    games = [game_over("t1", n) for n in range(1, 9)]
    try:
        writer.submit(games[:2])
        async with asyncio.timeout(30):
            assert await writer.written("t1")
        counted.fail_after = 3
        writer.submit(games)  # the first two again (replayed after a failover), then six more
        async with asyncio.timeout(30):
            assert await writer.written("t1")
    finally:
        await writer.stop()
    assert writer.failures == 1
    assert writer.written_count == 8
    assert await _stored_ids(store) == [f"t1:{n}" for n in range(1, 9)]
    history, _ = await store.rating_history("p0", "blackdrez")
    points = list(reversed(history))
    assert [point.game_id for point in points] == [f"t1:{n}" for n in range(1, 9)]
    for before, after in itertools.pairwise(points):  # rated in the order played
        assert after.mu_before == before.mu and after.sigma_before == before.sigma


async def test_on_postgresql_the_writer_connects_again_after_its_connection_is_cut(
    postgres_server: PostgresServer,
) -> None:
    """The writer thread's own connection is cut by the server (a restart, a failover, an
    administrator): the next batch goes out on a new one, and every game is stored once."""
    url = postgres_server.create_schema()
    store = await RecordsStore.open(url)
    writer = RecordsWriter(store)
    writer.start()
    try:
        writer.submit([game_over("t1", 1)])
        assert await writer.written("t1")
        connection = await asyncpg.connect(url)
        try:
            cut = await connection.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database()"
            )
        finally:
            await connection.close()
        assert cut >= 1
        writer.submit([game_over("t1", n) for n in range(2, 6)])
        assert await writer.written("t1")
        assert writer.written_count == 5
        assert await _stored_ids(store) == [f"t1:{n}" for n in range(1, 6)]
    finally:
        await writer.stop()
        await store.close()
        postgres_server.drop_schema(url)


async def test_a_closed_postgresql_writer_refuses_a_batch_instead_of_hanging(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.create_schema()
    store = await RecordsStore.open(url)
    await store.close()
    try:
        async with asyncio.timeout(5):
            with pytest.raises(DatabaseError):
                await store.put_games([finished(game_over("t1", 1))])
    finally:
        postgres_server.drop_schema(url)


async def test_a_database_outage_does_not_shorten_the_gil_switch_interval() -> None:
    """Games pile up while PostgreSQL is down. The writer cannot store them, whatever the GIL:
    a shortened switch interval would cost the event loop for the whole outage and buy
    nothing. It stays as it was from the first failed write on; once the database is back and
    a write succeeds, a writer still behind catches up, and every game is stored once."""
    server = PostgresServer()
    await asyncio.to_thread(server.start)
    before = sys.getswitchinterval()
    metrics = Metrics()
    try:
        url = server.create_schema()
        store = await RecordsStore.open(url)
        writer = RecordsWriter(store, metrics)
        writer.start()
        try:
            writer.submit([game_over("t1", 1)])
            assert await writer.written("t1")
            await asyncio.to_thread(server.stop)
            writer.submit([game_over("t1", n) for n in range(2, MAX_BATCH + 3)])
            async with asyncio.timeout(30):
                while not writer.failures:
                    await asyncio.sleep(0.05)
            assert not writer.catching_up and sys.getswitchinterval() == before
            assert metrics.records_catching_up._value.get() == 0
            writer.submit([game_over("t1", n) for n in range(MAX_BATCH + 3, MAX_BATCH + 13)])
            await asyncio.sleep(0.5)  # retries on the backoff, still failing
            assert not writer.catching_up and sys.getswitchinterval() == before
            await asyncio.to_thread(server.start)
            assert await writer.written("t1", timeout=60)
            assert writer.written_count == MAX_BATCH + 12
            assert sys.getswitchinterval() == before
            assert await _stored_ids(store) == [f"t1:{n}" for n in range(1, MAX_BATCH + 13)]
        finally:
            await writer.stop()
            await store.close()
    finally:
        await asyncio.to_thread(server.close)
