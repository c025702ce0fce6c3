"""The records database's link in the handshake: a PostgreSQL that stops answering (its link
cut, packets dropped: the query waits, it does not fail) must not hold a player's ``hello``.

Found by the three-host test (``tests/faults/test_hosts.py``): PostgreSQL on the host cut off,
the other nodes' account checks of every player moving to them waited for the link's TCP
retransmissions (until 16 s after the heal), so the players stayed at the node cut off from the
store for the whole cut while their tables went on elsewhere."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from blackdrez.clients.client import Client
from blackdrez.server.session import ACCOUNT_CHECK_TIMEOUT
from blackdrez.server.testing.postgres_server import PostgresServer
from tests.faults.proxy import DatabaseProxy

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    url = postgres_server.create_schema()
    yield url
    postgres_server.drop_schema(url)


async def test_a_hello_is_answered_while_the_records_database_does_not_answer(
    make_server, database: str
) -> None:
    proxy = DatabaseProxy(int(database.split(":")[2].split("/")[0]))
    await proxy.start()
    server = await make_server(db_url=proxy.url_of(database))
    url = f"ws://127.0.0.1:{server.port}/"
    first = await Client.connect(url, name="Ann")
    token = first.token
    await first.close()
    proxy.hold()  # every query from now on waits, as over a link that drops its packets
    try:
        began = time.monotonic()
        again = await asyncio.wait_for(Client.connect(url, token=token), 20)
        waited = time.monotonic() - began
        assert again.player == first.player, "the same player, their token taken"
        assert waited < ACCOUNT_CHECK_TIMEOUT + 1.0, f"the hello waited {waited:.1f} s"
        await again.close()
    finally:
        proxy.release()
        await proxy.cut()
