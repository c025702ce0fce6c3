"""The in-memory store: the default, for one server process with nothing to install."""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from collections import defaultdict

from server.stores.base import Handler, LeaseLost, Store


class MemoryStore(Store):
    """Everything in this process's memory; the bus delivers within the process."""

    shared = False

    def __init__(self, node_id: str) -> None:
        super().__init__(node_id)
        self._secret: bytes | None = None
        self._tables: dict[str, tuple[str, bytes, bool]] = {}
        self._player_tables: dict[str, set[str]] = defaultdict(set)
        self._heartbeats: dict[str, float] = {}
        self._scores: dict[str, dict[str, tuple[int, int, str]]] = defaultdict(dict)
        self._order = itertools.count()
        self._handlers: dict[str, list[Handler]] = defaultdict(list)
        self._leases: dict[str, tuple[str, float]] = {}
        self._hosted: set[str] = set()
        self._logs: dict[str, list[bytes]] = defaultdict(list)

    async def shared_secret(self, proposed: bytes) -> bytes:
        if self._secret is None:
            self._secret = proposed
        return self._secret

    async def put_table(self, table_id: str, node_id: str, record: bytes, listed: bool) -> None:
        self._tables[table_id] = (node_id, record, listed)

    async def get_table(self, table_id: str) -> tuple[str, bytes] | None:
        entry = self._tables.get(table_id)
        return None if entry is None else (entry[0], entry[1])

    async def remove_table(self, table_id: str) -> None:
        self._tables.pop(table_id, None)

    async def list_tables(self) -> list[bytes]:
        return [record for _, record, listed in self._tables.values() if listed]

    async def add_player_table(self, player: str, table_id: str) -> None:
        self._player_tables[player].add(table_id)

    async def remove_player_table(self, player: str, table_id: str) -> None:
        self._player_tables[player].discard(table_id)

    async def player_tables(self, player: str) -> list[str]:
        return sorted(self._player_tables.get(player, ()))

    async def heartbeat(self, ttl: float) -> None:
        self._heartbeats[self.node_id] = time.monotonic() + ttl

    async def live_nodes(self) -> set[str]:
        now = time.monotonic()
        return {node for node, expiry in self._heartbeats.items() if expiry > now}

    async def submit_score(self, game: str, player: str, name: str, score: int) -> None:
        board = self._scores[game]
        best = board.get(player)
        if best is None or score > best[0]:
            board[player] = (score, next(self._order), name)

    async def top_scores(self, game: str, limit: int) -> list[tuple[str, str, int]]:
        board = self._scores.get(game, {})
        ranked = sorted(board.items(), key=lambda item: (-item[1][0], item[1][1]))
        return [(player, name, score) for player, (score, _, name) in ranked[:limit]]

    def _holder(self, table_id: str) -> str | None:
        lease = self._leases.get(table_id)
        if lease is None or lease[1] <= time.monotonic():
            return None
        return lease[0]

    async def acquire_lease(self, table_id: str, ttl: float) -> bool:
        if self._holder(table_id) is not None:
            return False
        self._leases[table_id] = (self.node_id, time.monotonic() + ttl)
        self._hosted.add(table_id)
        return True

    async def renew_leases(self, table_ids: list[str], ttl: float) -> set[str]:
        lost = set()
        for table_id in table_ids:
            holder = self._holder(table_id)
            if holder in (None, self.node_id):
                self._leases[table_id] = (self.node_id, time.monotonic() + ttl)
            else:
                lost.add(table_id)
        return lost

    async def release_lease(self, table_id: str) -> None:
        if self._holder(table_id) == self.node_id:
            del self._leases[table_id]

    async def orphaned_tables(self) -> list[str]:
        return sorted(t for t in self._hosted if self._holder(t) is None)

    async def append_log(
        self, table_id: str, entry: bytes, channel: str = "", announce: bytes | None = None
    ) -> None:
        if self._holder(table_id) != self.node_id:
            raise LeaseLost(table_id)
        self._logs[table_id].append(entry)
        if announce is not None:
            await self.publish(channel, announce)

    async def read_log(self, table_id: str) -> list[bytes]:
        return list(self._logs.get(table_id, ()))

    async def retire_table(self, table_id: str, keep_log: float) -> None:
        self._hosted.discard(table_id)
        self._leases.pop(table_id, None)
        self._logs.pop(table_id, None)  # one process: nobody else will read it

    async def publish(self, channel: str, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        for handler in list(self._handlers.get(channel, ())):
            loop.call_soon(handler, data)

    async def subscribe(self, channel: str, handler: Handler) -> None:
        self._handlers[channel].append(handler)

    async def unsubscribe(self, channel: str, handler: Handler) -> None:
        handlers = self._handlers.get(channel)
        if handlers and handler in handlers:
            handlers.remove(handler)
            if not handlers:
                del self._handlers[channel]

    # ------------------------------------------------------------------ revoked session tokens
    @functools.cached_property
    def _revoked(self) -> dict[str, float]:
        """Revoked token ids -> when they would have expired anyway (monotonic clock)."""
        return {}

    async def revoke_token(self, token_id: str, ttl: float) -> None:
        now = time.monotonic()
        for expired in [key for key, until in self._revoked.items() if until <= now]:
            del self._revoked[expired]  # each revocation sweeps: the list never outgrows its TTLs
        self._revoked[token_id] = now + ttl

    async def token_revoked(self, token_id: str) -> bool:
        return self._revoked.get(token_id, 0.0) > time.monotonic()
