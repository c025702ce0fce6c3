"""What one Redis is asked per call: the periodic lease renewal of a node's tables is one
script call however many tables it hosts (a node of a few hundred tables renews them several
times a second, and a command per table cost the node's CPU and Redis's)."""

from __future__ import annotations

from blackdrez.server.stores.redis import redis_stores
from tests.test_group_commit import script_calls


async def test_renewing_many_leases_is_one_script_call(redis_url_clean: str) -> None:
    store = redis_stores(redis_url_clean, "node-a")
    await store.start()
    try:
        tokens = {}
        for i in range(200):
            token = await store.leases.acquire(f"t{i}", 5)
            assert token is not None
            tokens[f"t{i}"] = token
        before = script_calls(redis_url_clean)
        assert await store.leases.renew(tokens, 5) == set()
        assert script_calls(redis_url_clean) - before == 1
    finally:
        await store.close()
