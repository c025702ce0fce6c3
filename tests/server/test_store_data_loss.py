"""A Redis that comes back empty (no persistence, or a replica promoted before it had the data):
the nodes say so loudly, and the token secret they all sign sessions with is written again by
the nodes that hold it, so a node started afterwards agrees with them instead of making a new
one (which would refuse every session the others issued: close 4002, for good)."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis.asyncio as aioredis

from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.stores.keys import SECRET_KEY
from blackdrez.server.testing.redis_server import RedisServer
from tests.server.helpers import wait_for


async def test_a_store_back_empty_is_reported_and_the_nodes_keep_one_secret(
    make_server, caplog: pytest.LogCaptureFixture
) -> None:
    with RedisServer() as store:  # no append-only file: a restart loses everything
        first = await make_server(redis_url=store.url)
        ann = await Client.connect(f"ws://127.0.0.1:{first.port}/", name="Ann")
        token = ann.token
        await ann.close()
        caplog.set_level(logging.ERROR, logger="blackdrez.server")
        await asyncio.to_thread(store.stop)
        await wait_for(lambda: not first.store.health.up, "the node sees its store gone")
        await asyncio.to_thread(store.start)
        await wait_for(lambda: first.store.health.up, "the node sees its store back", 10)
        direct = aioredis.from_url(store.url)
        try:
            async with asyncio.timeout(5):  # the node writes its secret back
                while await direct.get(SECRET_KEY) is None:
                    await asyncio.sleep(0.05)
            assert await direct.get(SECRET_KEY) == first.secret
        finally:
            await direct.aclose()
        assert any("came back without its data" in r.getMessage() for r in caplog.records)

        second = await make_server(redis_url=store.url)
        assert second.secret == first.secret
        again = await Client.connect(f"ws://127.0.0.1:{second.port}/", token=token)
        assert again.player == ann.player, "a session issued before the loss is still good"
        assert isinstance(await again.request(v1.Ping()), v1.Pong)
        await again.close()


async def test_a_store_back_again_and_again_is_checked_one_check_at_a_time(make_server) -> None:
    """A store failing over comes back again and again (a cluster's replica promoted: each
    call that worked again says so); each check is a transaction, which on a cluster runs in a
    thread and an event loop of redis-py's. One check runs at a time: the backs that come while
    it runs make it check once more, not start one each (three nodes' worth of CPU, in the
    master-kill fault test, went to them)."""
    server = await make_server()
    tokens = server.store.tokens
    restore, calls, gate = tokens.restore_secret, [], asyncio.Event()

    async def held(secret: bytes) -> bytes | None:
        calls.append(secret)
        await gate.wait()
        return await restore(secret)

    tokens.restore_secret = held  # type: ignore[method-assign]
    for _ in range(5):
        server._store_back()
        await asyncio.sleep(0)
    assert len(calls) == 1, "one check at a time"
    gate.set()
    await wait_for(lambda: not server._checks, "the check ends")
    assert len(calls) == 2, "the backs meanwhile: checked once more"
    server._store_back()
    await wait_for(lambda: not server._checks, "a later back is checked")
    assert len(calls) == 3
