"""One connection floods a rated table with sit-downs and leaves, each of which has the node read
the seated players' ratings from the records database (PostgreSQL).

The flood is paced a little over the connection's message rate first (most messages go through,
so the node reads ratings as fast as one connection can make it), then sent as fast as the
socket takes it. Meanwhile two players play at another rated table of the same node, and a third
player opens a rated table of his own. The flood must be refused with the usual typed error
(``rate_limited``, then the 1008 close), the others must not notice it (their moves answered at
once, the newcomer's rating shown within a second or two), the node must stay within its pool of
database connections, and its CPU bounded.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from typing import Any

import asyncpg
import pytest

from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.server.records.db import POOL_SIZE
from blackdrez.server.stores.keys import log_key
from blackdrez.server.testing.nodes import CpuSampler, NodeProcess
from blackdrez.server.testing.postgres_server import PostgresServer
from blackdrez.server.testing.redis_cluster import direct_client
from blackdrez.server.testing.redis_server import RedisServer
from tests.faults.players import act_on_turn, close_all, game_over, until

pytestmark = [pytest.mark.timeout(180)]

PACED = 6.0
"""Seconds of the flood paced at :data:`PACE` messages a second (the limit is 30, burst 60)."""
PACE = 45.0
FLAT_OUT = 4.0
"""Seconds of the flood at full speed after that, unless the node closes the connection first."""
FLOOD_CPU = 50.0
"""Mean CPU (% of one core) the node may use during the flood."""
MOVE_BOUND = 1.0
"""Seconds another table's move may take to be acknowledged during the flood."""
RATING_BOUND = 2.0
"""Seconds a newcomer's rating may take to show at his own table during the flood."""


def rated_seats_shown(client: Client, table: str) -> bool:
    info = client.tables[table].info
    seats = [seat for seat in info.seats if seat is not None] if info else []
    return bool(seats) and all(seat.rating is not None for seat in seats)


async def rated_table(client: Client, seats: int) -> str:
    options = v1.TableOptions(seats=seats, max_rounds=8, round_pause_seconds=0, rated=True)
    return (await client.request(v1.CreateTable(options=options))).table.id


async def node_connections(monitor: asyncpg.Connection, database: str) -> int:
    """The connections open to ``database`` (only the node uses it)."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE datname = $1"
    return int(await monitor.fetchval(query, database))


async def test_a_sit_and_leave_flood_at_a_rated_table_is_refused_and_harms_no_one_else(
    durable_redis: RedisServer,
    postgres_server: PostgresServer,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    database_url = postgres_server.create_database()
    database = database_url.rsplit("/", 1)[1]
    node = NodeProcess(durable_redis.url, "flood0", db_url=database_url)
    monitor = await asyncpg.connect(postgres_server.url())
    clients: list[Client] = []
    try:
        await asyncio.to_thread(node.start)
        cpu.watch(node.node_id, node.pid)

        async def connect(name: str, **options: Any) -> Client:
            client = await Client.connect(node.url, name=name, binary=True, **options)
            clients.append(client)
            return client

        host, ann, bob = [await connect(n) for n in ("Host", "Ann", "Bob")]
        mallory = await connect("Mallory", rate_limit_retries=0, pace=False)  # floods
        flooded = await rated_table(host, seats=4)
        other = await rated_table(ann, seats=2)
        await bob.request(v1.JoinTable(table=other))
        await bob.request(v1.SetReady(table=other))
        await ann.request(v1.StartGame(table=other))
        for client in (ann, bob):
            await client.wait_until(lambda c=client: c.tables[other].view is not None, 30)
        await until(lambda: rated_seats_shown(host, flooded), 30)

        replies: collections.Counter[str] = collections.Counter()
        flooding = True

        async def flood() -> None:
            nonlocal flooding
            began = time.monotonic()
            sit = True
            try:
                while (elapsed := time.monotonic() - began) < PACED + FLAT_OUT:
                    message = v1.JoinTable(table=flooded) if sit else v1.LeaveTable(table=flooded)
                    sit = not sit
                    try:
                        await mallory.request(message, timeout=10)
                        replies["ok"] += 1
                    except ServerError as error:
                        replies[error.code] += 1
                    if elapsed < PACED:
                        await asyncio.sleep(1 / PACE)
            except (ConnectionError, TimeoutError) as error:
                replies[f"connection ended: {error}"] += 1
            finally:
                flooding = False

        moves: list[float] = []

        async def play_meanwhile() -> None:
            while flooding and not game_over(ann, other):
                began = time.monotonic()
                await act_on_turn([ann, bob], other)
                moves.append(time.monotonic() - began)
                await asyncio.sleep(0.05)

        most_connections = 0

        async def count_connections() -> None:
            nonlocal most_connections
            while flooding:
                most_connections = max(most_connections, await node_connections(monitor, database))
                await asyncio.sleep(0.1)

        started = time.monotonic()
        tasks = [asyncio.create_task(job()) for job in (flood, play_meanwhile, count_connections)]
        try:
            await asyncio.sleep(PACED / 2)
            dave = await connect("Dave")
            asked = time.monotonic()
            own = await rated_table(dave, seats=2)
            await until(lambda: rated_seats_shown(dave, own), 30)
            figures["newcomer's rating shown after, s"] = round(time.monotonic() - asked, 2)
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.gather(*tasks)
        ended = time.monotonic()
        stats = cpu.stats(node.node_id, started, ended)
        figures["flood replies"] = dict(replies)
        figures["flood CPU % mean/max"] = f"{stats.mean:.0f}/{stats.peak:.0f}"
        figures["other table's moves"] = len(moves)
        figures["other table's slowest move, s"] = round(max(moves, default=0.0), 3)
        figures["database connections at most"] = most_connections

        assert replies["rate_limited"] > 0, replies
        assert not {"internal", "unavailable"} & set(replies), replies
        assert figures["newcomer's rating shown after, s"] <= RATING_BOUND, figures
        assert len(moves) >= 5 and max(moves) <= MOVE_BOUND, moves
        assert 0 < most_connections <= POOL_SIZE, most_connections
        assert stats.mean <= FLOOD_CPU, figures
        # The flooded table goes on: the host seated (and the flooder, if its last sit-down went
        # through: closed, it is away for the grace period), every seated rating shown.
        await host.resync(flooded)
        info = host.tables[flooded].info
        seated = [s.player for s in info.seats if s is not None]
        assert seated[0] == host.player and set(seated) <= {host.player, mallory.player}, info
        assert rated_seats_shown(host, flooded)
        with direct_client(durable_redis.url) as direct:
            figures["flooded table's log entries"] = direct.xlen(log_key(flooded))
        assert "Traceback" not in "".join(node.output())
    finally:
        await close_all(clients)
        await monitor.close()
        node.stop()
