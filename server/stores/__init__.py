"""Lobby stores: one interface (``base.Store``), kept in memory or in Redis."""

from __future__ import annotations

from blackdrez.server.stores.base import LeaseLost, Store, StoreRefused, StoreUnavailable
from blackdrez.server.stores.memory import MemoryStore


def open_store(
    redis_url: str | None, node_id: str, *, wait_replicas: int = 0, wait_timeout_ms: int = 100
) -> Store:
    """Return the Redis store for ``redis_url`` (a Redis Cluster's for ``redis+cluster://``),
    or the in-memory store when it is empty. ``wait_replicas`` and ``wait_timeout_ms``: see
    :class:`~blackdrez.server.stores.redis.RedisStore`."""
    if not redis_url:
        return MemoryStore(node_id)
    if redis_url.startswith("redis+cluster://"):
        from blackdrez.server.stores.redis_cluster import RedisClusterStore

        return RedisClusterStore(
            redis_url, node_id, wait_replicas=wait_replicas, wait_timeout_ms=wait_timeout_ms
        )
    from blackdrez.server.stores.redis import RedisStore

    return RedisStore(
        redis_url, node_id, wait_replicas=wait_replicas, wait_timeout_ms=wait_timeout_ms
    )


__all__ = [
    "LeaseLost",
    "MemoryStore",
    "Store",
    "StoreRefused",
    "StoreUnavailable",
    "open_store",
]
