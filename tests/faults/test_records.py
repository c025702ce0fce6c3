"""Records across node deaths: a node SIGKILLed after a game ended, before its record was
written, loses nothing, and the game is stored exactly once (real node processes, a real Redis
and a real PostgreSQL shared by the nodes)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from clients.bots import play_table
from clients.client import Client
from protocol import v1
from server.records.store import RecordsStore
from server.testing.nodes import NodeProcess
from server.testing.postgres_server import PostgresServer
from server.testing.redis_server import RedisServer

pytestmark = pytest.mark.timeout(240)

DEADLINE = 60.0


class CuttableProxy:
    """A TCP proxy to the database that the test can cut: every connection through it drops
    and new ones are refused, as when a node loses its way to the database."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self.writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def cut(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()


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
    proxy = CuttableProxy(postgres_server.port)
    proxy_port = await proxy.start()
    through_proxy = database.replace(f":{postgres_server.port}/", f":{proxy_port}/")
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
