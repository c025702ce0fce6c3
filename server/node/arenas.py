"""Arenas: tournaments of a fixed length whose players are paired into tables as they come free.

Theory of operation
-------------------
An arena (``create_arena``) is kept in the store (``Stores.arenas``): its description and, per
player, a standing (:class:`~blackdrez.games.arena.Standing`). Nothing runs it: a
player's ``join_arena`` notes their standing and puts a ticket in the matchmaking queue whose
pool is the arena (:meth:`Matchmaker.enter <blackdrez.server.node.matchmaking.Matchmaker.enter>`),
so the node leading the queue pairs the arena's players only with each other, into tables of
the arena's size, marked with the arena (``Create.arena``). When such a table's game ends, its
host scores it in the arena from its outbox (``arena_scores.score_in_arena``): each player's
standing is read, scored (:func:`~blackdrez.games.arena.scored`) and written back
over what was read, the game noted once (a failover that finishes the same game again scores
nothing). The store announces every change on the arena's channel; each node with players or
watchers of the arena here reads the standings and pushes ``arena_standings`` to them. A client
sends ``join_arena`` again after each game to be paired again (the Python client and the bots
do).

Arenas the operator schedules (``--arena-schedule``,
:mod:`blackdrez.server.matchmaking.schedule`) are made by every node, ahead of their start
(:meth:`ArenaHall.keep_scheduled`): an occurrence's id and description follow from its schedule,
so making it again changes nothing, and no node has to be the one that does.

Because the arena is only data in the store, it survives any node: a table being made when the
matcher dies is made again by the next one (the tickets stay queued), a game whose host dies is
finished and scored by the node that adopts its table.

The state this component owns: the connections here watching each arena.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from blackdrez.games.arena import Standing
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.connection import Connection
from blackdrez.server.matchmaking.schedule import AHEAD, CHECK_EVERY, MAKER, ArenaSchedule
from blackdrez.server.node.arena_scores import (
    RETRIES,
    StoredArena,
    arena_decoder,
    encode,
    standing_decoder,
    standing_lines,
)
from blackdrez.server.node.clock import Clock
from blackdrez.server.node.seams import Spawn, error_answer
from blackdrez.server.ratelimit import KeyedBuckets
from blackdrez.server.stores import Stores, StoreUnavailable
from blackdrez.server.stores.base import arena_channel
from blackdrez.server.stores.keys import ARENA_KEEP
from blackdrez.server.table.commands import Answer

if TYPE_CHECKING:
    from blackdrez.server.node.matchmaking import Matchmaker

log = logging.getLogger("blackdrez.arenas")

LISTED_AFTER_END = 24 * 3600.0
"""Seconds a finished public arena stays in ``list_arenas``."""
CREATE_RATE = 1 / 60
CREATE_BURST = 3
"""Arenas a player may make: 3 at once, then one a minute (each is kept for a month)."""
CREATE_KEYS = 10_000


class ArenaHall:
    """The arena requests and the standings pushes of this node (see the module docstring)."""

    def __init__(
        self,
        store: Stores,
        clock: Clock,
        matchmaker: Matchmaker,
        *,
        spawn: Spawn,
        schedule: Sequence[ArenaSchedule] = (),
    ) -> None:
        self.store = store
        self.clock = clock
        self.matchmaker = matchmaker
        self._spawn = spawn
        self.schedule = tuple(schedule)
        """The arenas the operator scheduled (made by :meth:`keep_scheduled`)."""
        self.watchers: dict[str, set[Connection]] = {}
        """The connections here that play in or watch each arena (its standings pushed)."""
        self._made = KeyedBuckets(CREATE_RATE, CREATE_BURST, CREATE_KEYS)
        """Per player, the rate limit of making arenas."""

    async def create(self, client: Connection, message: v1.CreateArena) -> Answer:
        """A new arena, made by ``client``'s player."""
        if not self._made.take(client.player, self.clock.monotonic()):
            wait = self._made.retry_after(client.player)
            why = "you made arenas just now: wait before the next"
            return error_answer(message, ErrorCode.RATE_LIMITED, why, wait)
        options = message.options
        now = self.clock.time()
        starts = now + options.starts_in
        kept = StoredArena(
            id=f"a{secrets.token_hex(5)}",
            name=options.name,
            maker=client.player,
            starts=starts,
            ends=starts + options.minutes * 60.0,
            seats=options.seats,
            rated=options.rated,
            private=options.private,
            invite=secrets.token_urlsafe(6) if options.private else None,
        )
        await self.store.arenas.create(
            kept.id, encode(kept), kept.ends, not kept.private, ARENA_KEEP
        )
        arena = v1.Arena(id=message.id, arena=kept.info(now), standings=[], invite=kept.invite)
        return Answer(replies=[arena])

    async def keep_scheduled(self) -> None:
        """Every :data:`CHECK_EVERY` seconds (the node made them once as it started), make the
        scheduled arenas running now or starting within :data:`AHEAD` seconds that the store
        does not hold yet (a failure waits for the next check)."""
        while self.schedule:
            await asyncio.sleep(CHECK_EVERY)
            try:
                await self.make_scheduled()
            except StoreUnavailable:
                log.warning("the scheduled arenas could not be checked (the store is down)")

    async def make_scheduled(self) -> list[str]:
        """One check of :meth:`keep_scheduled`: the ids of the arenas it made."""
        made: list[str] = []
        now = self.clock.time()
        for plan in self.schedule:
            for starts in plan.starts_between(now, AHEAD):
                arena = plan.arena_id(starts)
                if await self.store.arenas.info(arena) is not None:
                    continue
                kept = StoredArena(
                    id=arena,
                    name=plan.name,
                    maker=MAKER,
                    starts=starts,
                    ends=starts + plan.minutes * 60.0,
                    seats=plan.seats,
                    rated=plan.rated,
                    private=False,
                    invite=None,
                )
                await self.store.arenas.create(arena, encode(kept), kept.ends, True, ARENA_KEEP)
                log.info(
                    "made the scheduled arena %s (%s), starting at %.0f", arena, plan.name, starts
                )
                made.append(arena)
        return made

    async def join(self, client: Connection, message: v1.JoinArena) -> Answer:
        """``client``'s player plays in the arena: their standing (kept if they had one), a
        ticket in its pool, and its standings pushed to them."""
        kept = await self._arena(message.arena, client.player, message.invite)
        if isinstance(kept, v1.Error):
            return Answer(replies=[msgspec.structs.replace(kept, id=message.id)])
        now = self.clock.time()
        if now >= kept.ends:
            return error_answer(message, ErrorCode.ARENA_OVER, "this arena has ended")
        fresh = Standing(player=client.player, name=client.name, bot=client.bot, joined=now)
        for _ in range(RETRIES):
            old = (await self.store.arenas.standings(kept.id)).get(client.player)
            if old is not None and standing_decoder.decode(old).active:
                break
            standing = (
                fresh
                if old is None
                else msgspec.structs.replace(standing_decoder.decode(old), active=True)
            )
            change = {client.player: (old, encode(standing))}
            if await self.store.arenas.update(kept.id, change, None):
                break
        await self.matchmaker.enter(
            client,
            seats=kept.seats,
            rated=kept.rated,
            pool=kept.id,
            opens=kept.starts,
            closes=kept.ends,
        )
        return await self._answer(client, kept, message.id, now)

    async def leave(self, client: Connection, message: v1.LeaveArena) -> Answer:
        """``client``'s player is no longer paired in the arena; their points stay."""
        await self.matchmaker.leave_pool(client, message.arena)
        for _ in range(RETRIES):
            old = (await self.store.arenas.standings(message.arena)).get(client.player)
            if old is None:
                break
            standing = standing_decoder.decode(old)
            if not standing.active:
                break
            gone = encode(msgspec.structs.replace(standing, active=False))
            if await self.store.arenas.update(message.arena, {client.player: (old, gone)}, None):
                break
        return Answer(replies=[v1.Ok(id=message.id)])

    async def watch(self, client: Connection, message: v1.WatchArena) -> Answer:
        """``client`` follows the arena's standings."""
        kept = await self._arena(message.arena, client.player, message.invite)
        if isinstance(kept, v1.Error):
            return Answer(replies=[msgspec.structs.replace(kept, id=message.id)])
        return await self._answer(client, kept, message.id, self.clock.time())

    async def unwatch(self, client: Connection, message: v1.UnwatchArena) -> Answer:
        await self._stop_watching(client, message.arena)
        return Answer(replies=[v1.Ok(id=message.id)])

    async def listed(self, message: v1.ListArenas) -> Answer:
        """The public arenas upcoming, running, or ended within the last day."""
        now = self.clock.time()
        infos = []
        for data in await self.store.arenas.listed(now - LISTED_AFTER_END):
            kept = arena_decoder.decode(data)
            players = len(await self.store.arenas.standings(kept.id))
            infos.append(kept.info(now, players))
        return Answer(replies=[v1.Arenas(id=message.id, arenas=infos)])

    async def forget(self, client: Connection) -> None:
        """``client`` closed: it watches nothing any more."""
        for arena in [a for a, clients in self.watchers.items() if client in clients]:
            await self._stop_watching(client, arena)

    async def _arena(self, arena: str, player: str, invite: str | None) -> StoredArena | v1.Error:
        data = await self.store.arenas.info(arena)
        if data is None:
            return v1.Error(code=ErrorCode.NOT_FOUND, message=f"no arena {arena!r}")
        kept = arena_decoder.decode(data)
        if kept.private and player != kept.maker and invite != kept.invite:
            return v1.Error(
                code=ErrorCode.INVITE_REQUIRED, message="this arena is private: ask for its link"
            )
        return kept

    async def _answer(
        self, client: Connection, kept: StoredArena, request: int | None, now: float
    ) -> Answer:
        """Watch the arena (its channel heard while anyone here does), then its state."""
        watchers = self.watchers.get(kept.id)
        if watchers is None:
            await self.store.bus.subscribe(arena_channel(kept.id), self._on_change)
            watchers = self.watchers[kept.id] = set()
        watchers.add(client)
        standings = await self.store.arenas.standings(kept.id)
        lines = standing_lines(standings)
        invite = kept.invite if client.player == kept.maker else None
        arena = v1.Arena(
            id=request, arena=kept.info(now, len(lines)), standings=lines, invite=invite
        )
        return Answer(replies=[arena])

    async def _stop_watching(self, client: Connection, arena: str) -> None:
        watchers = self.watchers.get(arena)
        if watchers is None:
            return
        watchers.discard(client)
        if not watchers:
            del self.watchers[arena]
            with contextlib.suppress(StoreUnavailable):
                await self.store.bus.unsubscribe(arena_channel(arena), self._on_change)

    def _on_change(self, data: bytes) -> None:
        self._spawn(self._push(data.decode()))

    async def _push(self, arena: str) -> None:
        """The arena's standings changed: push them to its watchers here."""
        if not self.watchers.get(arena):
            return
        data = await self.store.arenas.info(arena)
        if data is None:
            return
        kept = arena_decoder.decode(data)
        lines = standing_lines(await self.store.arenas.standings(arena))
        pushed = v1.ArenaStandings(arena=kept.info(self.clock.time(), len(lines)), standings=lines)
        for client in list(self.watchers.get(arena, ())):
            if not client.closing:
                client.send(pushed)
