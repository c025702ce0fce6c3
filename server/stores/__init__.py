"""Lobby stores: one interface (``base.Store``), kept in memory or in Redis."""

from __future__ import annotations

from server.stores.base import LeaseLost, Store, StoreUnavailable
from server.stores.memory import MemoryStore


def open_store(redis_url: str | None, node_id: str) -> Store:
    """Return the Redis store for ``redis_url``, or the in-memory store when it is empty."""
    if redis_url:
        from server.stores.redis import RedisStore

        return RedisStore(redis_url, node_id)
    return MemoryStore(node_id)


__all__ = ["LeaseLost", "MemoryStore", "Store", "StoreUnavailable", "open_store"]
