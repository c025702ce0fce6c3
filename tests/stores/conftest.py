"""The stores each contract runs on: in memory, on one Redis, on a Redis Cluster.

Each ``test_<concern>.py`` here is one interface's contract (:mod:`blackdrez.server.stores.base`):
its tests take the ``stores`` fixture and run against every implementation, the Redis-only ones
(several nodes on one Redis, the key layout, Redis going away under a live store) take
``open_redis_stores``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from blackdrez.server.stores import Stores, open_stores
from blackdrez.server.testing.redis_server import RedisServer

from .helpers import OpenRedisStores


@pytest.fixture(params=["memory", "redis", "cluster"])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[Stores]:
    """Started stores of each kind, empty, for node ``node-a``: in memory, on one Redis, on a
    Redis Cluster of three masters and three replicas."""
    url = {
        "memory": None,
        "redis": "redis_url_clean",
        "cluster": "redis_cluster_url_clean",
    }[request.param]
    started = open_stores(request.getfixturevalue(url) if url else None, "node-a")
    await started.start()
    yield started
    await started.close()


@pytest.fixture
async def open_redis_stores(redis_url_clean: str) -> AsyncIterator[OpenRedisStores]:
    """Open started Redis stores on the clean session server (or ``url``); close them after."""
    opened: list[Stores] = []

    async def open_one(node_id: str = "node-a", url: str = redis_url_clean) -> Stores:
        started = open_stores(url, node_id)
        await started.start()
        opened.append(started)
        return started

    yield open_one
    for started in opened:
        await started.close()


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    """A Redis server of this test's own, which the test may stop and restart."""
    with RedisServer() as server:
        yield server
