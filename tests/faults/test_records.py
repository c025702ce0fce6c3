"""Records across node deaths: a node SIGKILLed after a game ended, before its record was
written, loses nothing, and the game is stored exactly once (real node processes, a real Redis
and a real PostgreSQL shared by the nodes)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from blackdrez.clients.bots import play_table
from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.testing.nodes import NodeProcess
from blackdrez.server.testing.postgres_server import PostgresServer
from blackdrez.server.testing.redis_server import RedisServer
from tests.faults.proxy import DatabaseProxy

pytestmark = pytest.mark.timeout(240)

DEADLINE = 60.0


@pytest.fixture
async def database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    url = postgres_server.create_schema()
    yield url
    postgres_server.drop_schema(url)


async def until(condition: Any, what: str) -> Any:
    deadline = time.monotonic() + DEADLINE
    while not (found := await condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)
    return found


async def test_a_node_killed_after_game_over_before_the_record_loses_nothing(
    durable_redis: RedisServer, postgres_server: PostgresServer, database: str
) -> None:
    proxy = DatabaseProxy(postgres_server.port)
    await proxy.start()
    through_proxy = proxy.url_of(database)
    doomed = NodeProcess(durable_redis.url, "rec0", db_url=through_proxy)
    survivor = NodeProcess(durable_redis.url, "rec1", db_url=database)
    store = await RecordsStore.open(database)
    clients: list[Client] = []
    try:
        await asyncio.gather(asyncio.to_thread(doomed.start), asyncio.to_thread(survivor.start))
        for name in ("Ann", "Bob"):
            clients.append(
                await Client.connect(
                    doomed.url, name=name, reconnect=True, also=(survivor.url,), binary=True
                )
            )
        ann, bob = clients
        options = v1.TableOptions(seats=2, max_rounds=1, round_pause_seconds=0, rated=True)
        table = (await ann.request(v1.CreateTable(options=options))).table.id
        await bob.request(v1.JoinTable(table=table))
        await bob.request(v1.SetReady(table=table))
        await proxy.cut()  # from now on the table's node cannot reach the database
        await ann.request(v1.StartGame(table=table))
        for client in clients:
            await client.wait_until(lambda c=client: c.tables[table].view is not None, 30)
        await asyncio.gather(*(play_table(c, table, timeout=120) for c in clients))
        game_id = f"{table}:1"

        async def failed_to_store() -> bool:
            return any(f"storing game {game_id} failed" in line for line in doomed.output())

        await until(failed_to_store, "the node's failed write")
        doomed.kill()  # the game is over, its record not written

        async def stored() -> Any:
            return await store.game(game_id)

        record = await until(stored, "the record written by the node that adopted the table")
        assert record.rated and {p.player for p in record.players} == {ann.player, bob.player}
        games, _ = await store.games()
        assert [g.id for g in games] == [game_id], "stored exactly once"
        for client in clients:
            (stats,) = await store.stats(client.player)
            assert stats.games == 1 and stats.rating is not None and stats.rating.games == 1
        assert any(f"adopted table {table}" in line for line in survivor.output())
    finally:
        for client in clients:
            await client.close()
        await store.close()
        doomed.stop()
        survivor.stop()
        await proxy.cut()
