"""The stores: one small interface per concern (:mod:`.base`), kept in memory or in Redis."""

from __future__ import annotations

from blackdrez.server.stores.base import LeaseLost, StoreRefused, Stores, StoreUnavailable
from blackdrez.server.stores.memory import memory_stores


def open_stores(
    redis_url: str | None,
    node_id: str,
    *,
    incarnation: str | None = None,
    wait_replicas: int = 0,
    wait_timeout_ms: int = 100,
) -> Stores:
    """Return the Redis stores for ``redis_url`` (a Redis Cluster's for ``redis+cluster://``),
    or the in-memory ones when it is empty. ``incarnation``: a second bundle of this process
    (its lease renewal thread's) holds the first one's leases. ``wait_replicas`` and
    ``wait_timeout_ms``: see :func:`~blackdrez.server.stores.redis.redis_stores`."""
    if not redis_url:
        return memory_stores(node_id, incarnation)
    if redis_url.startswith("redis+cluster://"):
        from blackdrez.server.stores.redis_cluster import cluster_stores

        return cluster_stores(
            redis_url,
            node_id,
            incarnation=incarnation,
            wait_replicas=wait_replicas,
            wait_timeout_ms=wait_timeout_ms,
        )
    from blackdrez.server.stores.redis import redis_stores

    return redis_stores(
        redis_url,
        node_id,
        incarnation=incarnation,
        wait_replicas=wait_replicas,
        wait_timeout_ms=wait_timeout_ms,
    )


__all__ = [
    "LeaseLost",
    "StoreRefused",
    "StoreUnavailable",
    "Stores",
    "memory_stores",
    "open_stores",
]
