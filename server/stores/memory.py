"""The in-memory store: the default, for one server process with nothing to install.

It keeps the same contract as the Redis store, fencing included (tokens, expected log positions,
retired tables never leased again), so the store tests hold the two to one behaviour. Retired
tables' game records expire after their retention like Redis keys would; nothing else outlives
what owns it (a player's table set goes when its last table does).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable

from blackdrez.server.stores.base import (
    Handler,
    LeaseLost,
    LobbyRecord,
    Location,
    Share,
    Store,
    Whereabouts,
    holder_value,
    in_share,
    parse_holder,
)


class MemoryStore(Store):
    """Everything in this process's memory; the bus delivers within the process."""

    shared = False

    def __init__(self, node_id: str) -> None:
        super().__init__(node_id)
        self._secret: bytes | None = None
        self._tables: dict[str, tuple[str, bytes, bool]] = {}
        self._player_tables: dict[str, set[str]] = defaultdict(set)
        self._heartbeats: dict[str, tuple[float, str]] = {}
        self._scores: dict[str, dict[str, tuple[int, int, bytes]]] = defaultdict(dict)
        self._kept: dict[str, bytes] = {}
        self._daily_seeds: dict[tuple[str, str], str] = {}
        self._daily_players: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
        """Per daily deal, who started it, each with the table of their ranked session."""
        self._daily_until: dict[tuple[str, str], float] = {}
        """Per daily deal, until when (monotonic clock) its claims are kept."""
        self._order = itertools.count()
        self._attaches = itertools.count(1)
        self._latest_attach: dict[str, int] = {}
        self._handlers: dict[str, list[Handler]] = defaultdict(list)
        self._leases: dict[str, tuple[str, float]] = {}
        self._epochs: dict[str, int] = {}
        self._hosted: set[str] = set()
        self._logs: dict[str, list[bytes]] = {}
        self._snapshots: dict[str, tuple[int, bytes]] = {}
        self._retired: collections.OrderedDict[str, tuple[float, bytes]] = collections.OrderedDict()
        """Retired tables' game records with their expiry, oldest first."""

    async def shared_secret(self, proposed: bytes) -> bytes:
        if self._secret is None:
            self._secret = proposed
        return self._secret

    async def put_table(
        self, table_id: str, node_id: str, record: bytes, listed: bool, token: int | None = None
    ) -> None:
        if token is not None:
            self._check_lease(table_id, token)
        self._tables[table_id] = (node_id, record, listed)

    async def get_table(self, table_id: str) -> tuple[str, bytes] | None:
        entry = self._tables.get(table_id)
        return None if entry is None else (entry[0], entry[1])

    async def remove_table(self, table_id: str) -> None:
        self._tables.pop(table_id, None)

    async def list_tables(self) -> list[bytes]:
        return [record for _, record, listed in self._tables.values() if listed]

    async def all_tables(self) -> list[tuple[str, str, bytes]]:
        return sorted((t, node, record) for t, (node, record, _) in self._tables.items())

    async def add_player_table(self, player: str, table_id: str) -> None:
        self._player_tables[player].add(table_id)

    async def remove_player_table(self, player: str, table_id: str) -> None:
        tables = self._player_tables.get(player)
        if tables is not None:
            tables.discard(table_id)
            if not tables:
                del self._player_tables[player]

    async def player_tables(self, player: str) -> list[str]:
        return sorted(self._player_tables.get(player, ()))

    async def next_attach(self, player: str) -> int:
        order = next(self._attaches)
        self._latest_attach[player] = order
        return order

    async def latest_attaches(self, players: list[str]) -> dict[str, int]:
        return {p: self._latest_attach[p] for p in players if p in self._latest_attach}

    async def heartbeat(self, ttl: float) -> None:
        self._heartbeats[self.node_id] = (time.monotonic() + ttl, self.incarnation)

    async def live_incarnations(self) -> dict[str, str | None]:
        now = time.monotonic()
        return {node: beat for node, (expiry, beat) in self._heartbeats.items() if expiry > now}

    async def submit_score(self, board: str, player: str, entry: bytes, score: int) -> bool:
        entries = self._scores[board]
        best = entries.get(player)
        if best is None or score > best[0]:
            entries[player] = (score, next(self._order), entry)
            return True
        return best[2] == entry

    async def top_scores(self, board: str, limit: int) -> list[tuple[str, bytes, int]]:
        entries = self._scores.get(board, {})
        ranked = sorted(entries.items(), key=lambda item: (-item[1][0], item[1][1]))
        return [(player, entry, score) for player, (score, _, entry) in ranked[:limit]]

    async def keep_record(self, game_id: str, data: bytes, ttl: float | None = None) -> None:
        self._kept[game_id] = data  # (a lone node's memory: a TTL would free little)

    async def kept_record(self, game_id: str) -> bytes | None:
        return self._kept.get(game_id)

    async def daily_seed(self, game: str, day: str, candidate: str | None) -> str | None:
        if candidate is None:
            return self._daily_seeds.get((game, day))
        return self._daily_seeds.setdefault((game, day), candidate)

    async def claim_daily(
        self, game: str, day: str, player: str, table: str, keep: float
    ) -> str | None:
        self._forget_old_claims()
        self._daily_until[game, day] = time.monotonic() + keep
        return self._daily_players[game, day].setdefault(player, table)

    async def daily_table(self, game: str, day: str, player: str) -> str | None:
        self._forget_old_claims()
        return self._daily_players.get((game, day), {}).get(player)

    def _forget_old_claims(self) -> None:
        """Drop the claims of the daily deals kept long enough (as Redis expires them)."""
        now = time.monotonic()
        for deal in [deal for deal, until in self._daily_until.items() if until <= now]:
            del self._daily_until[deal]
            self._daily_players.pop(deal, None)

    # ------------------------------------------------------------------ hosting
    def _holder(self, table_id: str) -> str | None:
        lease = self._leases.get(table_id)
        if lease is None or lease[1] <= time.monotonic():
            return None
        return lease[0]

    def _mine(self, token: int) -> str:
        return holder_value(self.node_id, self.incarnation, token)

    def _check_lease(self, table_id: str, token: int) -> None:
        if self._holder(table_id) != self._mine(token):
            raise LeaseLost(table_id)

    def _is_retired(self, table_id: str) -> bool:
        self._expire_records()
        return table_id in self._retired

    def _expire_records(self) -> None:
        now = time.monotonic()
        while self._retired:
            table_id, (expiry, _) = next(iter(self._retired.items()))
            if expiry > now:
                return
            del self._retired[table_id]
            self._epochs.pop(table_id, None)

    def _earlier_self(self, holder: str) -> bool:
        node_id, incarnation, _ = parse_holder(holder)
        return node_id == self.node_id and incarnation < self.incarnation

    async def acquire_lease(self, table_id: str, ttl: float) -> int | None:
        if self._is_retired(table_id):
            return None
        holder = self._holder(table_id)
        if holder is not None and not self._earlier_self(holder):
            return None
        token = self._epochs[table_id] = self._epochs.get(table_id, 0) + 1
        self._leases[table_id] = (self._mine(token), time.monotonic() + ttl)
        self._hosted.add(table_id)
        return token

    async def renew_leases(self, leases: dict[str, int], ttl: float) -> set[str]:
        lost = set()
        for table_id, token in leases.items():
            if self._holder(table_id) == self._mine(token):
                self._leases[table_id] = (self._mine(token), time.monotonic() + ttl)
            else:
                lost.add(table_id)
        return lost

    async def release_lease(self, table_id: str, token: int) -> None:
        if self._holder(table_id) == self._mine(token):
            del self._leases[table_id]

    async def adoptable_tables(
        self, share: Share | None = None, held: Collection[str] = ()
    ) -> list[str]:
        hosted = {t for t in self._hosted if in_share(t, share)} - set(held)
        gone = {t for t in hosted if self._is_retired(t) or t not in self._logs}
        self._hosted -= {t for t in gone if self._holder(t) is None}
        return sorted(
            t
            for t in hosted - gone
            if (holder := self._holder(t)) is None or self._earlier_self(holder)
        )

    async def locate(self, table_id: str) -> Location:
        if self._is_retired(table_id):
            return Location(Whereabouts.CLOSED)
        holder = self._holder(table_id)
        if holder is not None:
            node_id, incarnation, _ = parse_holder(holder)
            return Location(Whereabouts.HOSTED, node_id, incarnation)
        if table_id in self._logs or table_id in self._tables:
            return Location(Whereabouts.MOVING)
        return Location(Whereabouts.UNKNOWN)

    async def append_log(
        self,
        table_id: str,
        token: int,
        position: int,
        entry: bytes,
        channel: str = "",
        announce: bytes | None = None,
        lobby: LobbyRecord | None = None,
        logged: Callable[[], None] | None = None,
    ) -> bool:
        self._check_lease(table_id, token)
        entries = self._logs.setdefault(table_id, [])
        if len(entries) != position - 1:
            if not entries:
                del self._logs[table_id]
            raise LeaseLost(f"{table_id}: the log holds {len(entries)} entries, not {position - 1}")
        entries.append(entry)
        heard = True
        if announce is not None:
            heard = bool(self._handlers.get(channel))
            await self.publish(channel, announce)
        if lobby is not None:
            self._tables[table_id] = (lobby.node, lobby.record, lobby.listed)
            if lobby.announce is not None:
                await self.publish(lobby.channel, lobby.announce)
        # ``logged`` is not called: this returns without a turn of the event loop, so the
        # caller's own call right after is as early
        return heard

    async def read_log(self, table_id: str, after: int = 0) -> list[bytes]:
        return list(self._logs.get(table_id, ())[after:])

    async def put_snapshot(self, table_id: str, token: int, position: int, data: bytes) -> None:
        self._check_lease(table_id, token)
        kept = self._snapshots.get(table_id)
        if kept is None or kept[0] < position:  # a later one stored first stays
            self._snapshots[table_id] = (position, data)

    async def read_snapshot(self, table_id: str) -> tuple[int, bytes] | None:
        return self._snapshots.get(table_id)

    async def retire_table(
        self,
        table_id: str,
        token: int,
        record: bytes,
        keep: float,
        players: Iterable[str] = (),
    ) -> None:
        self._check_lease(table_id, token)
        del self._leases[table_id]
        self._hosted.discard(table_id)
        self._logs.pop(table_id, None)
        self._snapshots.pop(table_id, None)
        self._tables.pop(table_id, None)
        for player in players:
            await self.remove_player_table(player, table_id)
        self._expire_records()
        self._retired[table_id] = (time.monotonic() + keep, record)

    async def game_record(self, table_id: str) -> bytes | None:
        self._expire_records()
        kept = self._retired.get(table_id)
        return None if kept is None else kept[1]

    # ------------------------------------------------------------------ bus
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
