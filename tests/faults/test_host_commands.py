"""A Redis outage after a game, while its table's node still has something to write: the
players' new ratings (``Ratings``) or a solitaire's par (``ParFound``) to log, or the closed
table to retire once its games are in the records.

The ratings and the par are found off the table's path (the ratings in the records database once
the game is stored, the par in the node's hint worker) and then appended to the table's log; a
closed table waits until its games are stored before its log gives way to its game record. Here
that write meets a Redis that is down. With a lease longer than the outage the table never moves:
nobody adopts it and reads the ratings or finds the par again, the host itself must write them
once Redis is back (a Redis restarted within a default 1 s lease does the same); with the default
lease, the closing table's lease lapses during the outage and the table must be adopted and
retired. Each scenario then checks that the node waited quietly (bounded CPU and log lines), that
what was missed is written within seconds of Redis's return, and that the table, once closed,
leaves a complete game record and no key without a lifetime.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from blackdrez.clients.bots import play_table
from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.stores.keys import epoch_key
from blackdrez.server.table.commands import ParFound, Ratings
from blackdrez.server.testing.nodes import CpuSampler, NodeProcess
from blackdrez.server.testing.postgres_server import PostgresServer
from blackdrez.server.testing.redis_cluster import direct_client
from blackdrez.server.testing.redis_server import RedisServer
from tests.faults.history import keys_without_ttl, read_table_logs, wait_closed
from tests.faults.players import request, until
from tests.faults.processes import hint_workers, signal_all, until_idle
from tests.faults.proxy import DatabaseProxy
from tests.faults.test_redis import QUIET_CPU, QUIET_LINES

pytestmark = [pytest.mark.timeout(180)]

LONG_LEASE = "30"
"""The node's lease TTL (s): longer than any outage here, so the table stays where it is."""
BACK_WITHIN = 10.0
"""Seconds after Redis's return within which the table must show what it missed (the bound of
the test; the node's store probe notices a return within 0.4 s)."""
PAR_ATTEMPTS = 9.0
"""Seconds Redis stays down after the par is found: longer than the node used to keep trying."""


@pytest.fixture
async def database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    url = postgres_server.create_schema()
    yield url
    postgres_server.drop_schema(url)


async def eventually(condition: Callable[[], Awaitable[Any]], what: str, timeout: float) -> Any:
    """Poll an async condition until it gives something true; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not (found := await condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)
    return found


def quiet(node: NodeProcess, cpu: CpuSampler, start: float, end: float, figures: dict) -> None:
    """Assert the node waited quietly between two instants (Redis down): bounded CPU and log
    lines per second, as in the other Redis outages (``test_redis.py``)."""
    stats = cpu.stats(node.node_id, start, end)
    lines = len(node.lines_between(start, end)) / max(end - start, 1e-6)
    figures["outage CPU % mean/max"] = f"{stats.mean:.0f}/{stats.peak:.0f}"
    figures["outage log lines/s"] = round(lines, 1)
    assert stats.mean <= QUIET_CPU and lines <= QUIET_LINES, figures


async def assert_retired_whole(redis_url: str, table: str, command: type) -> Any:
    """The closed table is retired (no key of it without a TTL) and its game record replays to
    the end, the ``command`` logged after the outage included; return that command."""
    await wait_closed(redis_url, [table], timeout=30)
    left = [key for key in await keys_without_ttl(redis_url) if f"{{{table}}}" in key]
    assert not left, f"keys left without a lifetime: {left}"
    (found,) = (await read_table_logs(redis_url, [table])).values()
    assert found.problem is None, found.problem
    assert found.room is not None and found.room.closed
    return [entry.command for entry in found.entries if isinstance(entry.command, command)]


def ratings_shown(client: Client, table: str, games: int) -> bool:
    info = client.tables[table].info
    seats = [seat for seat in info.seats if seat is not None] if info else []
    return bool(seats) and all(s.rating is not None and s.rating.games == games for s in seats)


async def shown_once_back(
    start: Callable[[], None],
    down: float,
    node: NodeProcess,
    cpu: CpuSampler,
    clients: list[Client],
    table: str,
    games: int,
    figures: dict[str, Any],
) -> None:
    """Bring what went down at ``down`` back (``start``), check that the node waited quietly
    meanwhile, and wait until every client shows ratings after ``games`` games."""
    await asyncio.to_thread(start)
    back = time.monotonic()
    quiet(node, cpu, down + 1.0, back - 0.5, figures)
    for client in clients:
        await until(lambda c=client: ratings_shown(c, table, games=games), BACK_WITHIN)
    figures["ratings shown after the return, s"] = round(time.monotonic() - back, 2)


async def two_at_a_table(
    node: NodeProcess, clients: list[Client], *, rated: bool
) -> tuple[Client, Client, str]:
    """Ann (the host) and Bob, ready, at a new one-round table of ``node``; both added to
    ``clients`` (for the caller to close)."""
    for name in ("Ann", "Bob"):
        clients.append(await Client.connect(node.url, name=name, binary=True))
    ann, bob = clients[-2:]
    options = v1.TableOptions(seats=2, max_rounds=1, round_pause_seconds=0, rated=rated)
    table = (await ann.request(v1.CreateTable(options=options))).table.id
    await bob.request(v1.JoinTable(table=table))
    await bob.request(v1.SetReady(table=table))
    return ann, bob, table


async def test_ratings_read_while_redis_is_down_are_shown_once_it_returns(
    durable_redis: RedisServer,
    postgres_server: PostgresServer,
    database: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """The game's record is stored while Redis is down (the database was slow: the game ended
    before its record could be written), so the new ratings are read then and their log
    append fails: the table must show them once Redis is back."""
    proxy = DatabaseProxy(postgres_server.port)
    await proxy.start()
    through_proxy = proxy.url_of(database)
    node = NodeProcess(
        durable_redis.url, "rated0", db_url=through_proxy, extra=["--lease-ttl", LONG_LEASE]
    )
    store = await RecordsStore.open(database)
    clients: list[Client] = []
    try:
        await asyncio.to_thread(node.start)
        cpu.watch(node.node_id, node.pid)
        ann, _, table = await two_at_a_table(node, clients, rated=True)
        await until(lambda: ratings_shown(ann, table, games=0), 30)
        proxy.hold()  # the game's record waits for the database...
        await ann.request(v1.StartGame(table=table))
        for client in clients:
            await client.wait_until(lambda c=client: c.tables[table].view is not None, 30)
        await asyncio.gather(*(play_table(c, table, timeout=120) for c in clients))
        await asyncio.to_thread(durable_redis.stop)  # ...and Redis goes down
        down = time.monotonic()
        proxy.release()  # the record is written, the new ratings read, their append fails
        game_id = f"{table}:1"
        await eventually(lambda: store.game(game_id), "the game's record", 30)
        await asyncio.sleep(3.0)
        assert ratings_shown(ann, table, games=0), "nothing new shown while Redis was down"
        await shown_once_back(durable_redis.start, down, node, cpu, clients, table, 1, figures)
        for client in clients:
            await request(client, v1.LeaveTable(table=table))
        logged = await assert_retired_whole(durable_redis.url, table, Ratings)
        assert all(r.games == 1 for r in logged[-1].ratings.values()), logged[-1]
        assert "Traceback" not in "".join(node.output())
    finally:
        for client in clients:
            await client.close()
        await store.close()
        node.stop()
        await proxy.cut()


async def test_a_rating_read_while_the_database_is_down_is_shown_once_it_returns(
    durable_redis: RedisServer, cpu: CpuSampler, figures: dict[str, Any]
) -> None:
    """Bob sits down at a rated table while the records database (a PostgreSQL of the test's
    own) is down, so his rating cannot be read then. Once the database is back the table must
    show it, with no other sit-down or game to make the node read again; meanwhile the node
    waits quietly."""
    database = PostgresServer()
    await asyncio.to_thread(database.start)
    node = NodeProcess(durable_redis.url, "rated1", db_url=database.create_schema())
    clients: list[Client] = []
    try:
        await asyncio.to_thread(node.start)
        cpu.watch(node.node_id, node.pid)
        clients.append(await Client.connect(node.url, name="Ann", binary=True))
        ann = clients[0]
        options = v1.TableOptions(seats=2, max_rounds=1, round_pause_seconds=0, rated=True)
        table = (await ann.request(v1.CreateTable(options=options))).table.id
        await until(lambda: ratings_shown(ann, table, games=0), 30)
        await asyncio.to_thread(database.stop)
        down = time.monotonic()
        clients.append(await Client.connect(node.url, name="Bob", binary=True))
        bob = clients[1]
        await bob.request(v1.JoinTable(table=table))
        await asyncio.sleep(3.0)
        assert not ratings_shown(ann, table, games=0), "a rating shown while the database was down"
        await shown_once_back(database.start, down, node, cpu, clients, table, 0, figures)
        assert "Traceback" not in "".join(node.output())
    finally:
        for client in clients:
            await client.close()
        node.stop()
        await asyncio.to_thread(database.close)


async def test_a_par_found_while_redis_is_down_is_logged_once_it_returns(
    durable_redis: RedisServer, cpu: CpuSampler, figures: dict[str, Any]
) -> None:
    """The par of a finished solitaire is found while Redis is down (its worker was held up
    until then) and stays unlogged for longer than the node's first attempts: the player must
    see it once Redis is back, and the game record must keep it."""
    node = NodeProcess(durable_redis.url, "par0", extra=["--lease-ttl", LONG_LEASE])
    client: Client | None = None
    workers: list[int] = []
    try:
        await asyncio.to_thread(node.start)
        cpu.watch(node.node_id, node.pid)
        client = await Client.connect(node.url, name="Ann", binary=True)
        table = (await client.request(v1.StartSolitaire(game="blue_jacket", deal=4))).table.id
        state = client.tables[table]
        await client.wait_until(lambda: state.view is not None)
        await client.request(v1.Hint(table=table), timeout=60)  # the worker pool starts
        workers = hint_workers(node.pid)
        assert workers, "no hint worker process"
        signal_all(workers, signal.SIGSTOP)
        await client.act(table, {"type": "resign"})
        await client.wait_until(lambda: any(e.event["type"] == "game_over" for e in state.events))
        await asyncio.sleep(0.5)  # the par's job is in the held worker
        await asyncio.to_thread(durable_redis.stop)
        down = time.monotonic()
        signal_all(workers, signal.SIGCONT)
        await until_idle(workers)  # the par is found...
        await asyncio.sleep(PAR_ATTEMPTS)  # ...and its appends fail meanwhile
        assert not any(e.event["type"] == "par" for e in state.events)
        await asyncio.to_thread(durable_redis.start)
        back = time.monotonic()
        quiet(node, cpu, down + 1.0, back - 0.5, figures)
        await until(lambda: any(e.event["type"] == "par" for e in state.events), BACK_WITHIN)
        figures["par shown after Redis's return, s"] = round(time.monotonic() - back, 2)
        await request(client, v1.LeaveTable(table=table))
        logged = await assert_retired_whole(durable_redis.url, table, ParFound)
        assert len(logged) == 1, logged
        assert "Traceback" not in "".join(node.output())
    finally:
        signal_all(workers, signal.SIGCONT)
        if client is not None:
            await client.close()
        node.stop()


@pytest.mark.parametrize("lease", ["1", LONG_LEASE])
async def test_a_closed_table_waiting_for_its_records_is_retired_once_redis_returns(
    durable_redis: RedisServer,
    postgres_server: PostgresServer,
    database: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
    lease: str,
) -> None:
    """The players leave after their game, so the table closes and waits for the game's record
    (the database is slow); Redis goes down meanwhile, then the record is stored. Once Redis is
    back the table is retired (by its host, or, its lease lapsed, by the node that adopts it:
    here the same node, the only one):
    its game record kept, in Redis and in the database, and every key of it given a TTL."""
    proxy = DatabaseProxy(postgres_server.port)
    await proxy.start()
    node = NodeProcess(
        durable_redis.url, "retire0", db_url=proxy.url_of(database), extra=["--lease-ttl", lease]
    )
    store = await RecordsStore.open(database)
    clients: list[Client] = []
    try:
        await asyncio.to_thread(node.start)
        cpu.watch(node.node_id, node.pid)
        ann, _, table = await two_at_a_table(node, clients, rated=False)
        proxy.hold()  # the game's record waits for the database
        await ann.request(v1.StartGame(table=table))
        for client in clients:
            await client.wait_until(lambda c=client: c.tables[table].view is not None, 30)
        await asyncio.gather(*(play_table(c, table, timeout=120) for c in clients))
        for client in clients:
            await client.request(v1.LeaveTable(table=table))  # closed: it waits for the record
        await asyncio.sleep(0.5)
        await asyncio.to_thread(durable_redis.stop)
        down = time.monotonic()
        proxy.release()  # the record is stored; retiring the table fails
        game_id = f"{table}:1"
        await eventually(lambda: store.game(game_id), "the game's record", 30)
        await asyncio.sleep(4.0)
        await asyncio.to_thread(durable_redis.start)
        back = time.monotonic()
        quiet(node, cpu, down + 1.0, back - 0.5, figures)
        await assert_retired_whole(durable_redis.url, table, v1.LeaveTable)
        figures["retired after Redis's return, s"] = round(time.monotonic() - back, 2)
        with direct_client(durable_redis.url) as direct:
            leased = int(direct.get(epoch_key(table)))
        figures["lease acquisitions"] = leased
        # A lease that lapsed in the outage was acquired again, to retire the table.
        assert leased == (1 if lease == LONG_LEASE else 2), leased
        games, _ = await store.games()
        assert [g.id for g in games] == [game_id], "stored exactly once"
        assert "Traceback" not in "".join(node.output())
    finally:
        for client in clients:
            await client.close()
        await store.close()
        node.stop()
        await proxy.cut()
