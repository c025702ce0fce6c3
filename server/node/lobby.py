"""Lobby: the table list, quick join, create-and-sit, daily deals, leaderboards, bots at a table.

Theory of operation
-------------------
The table list comes from the store's lobby (every node's listed tables); its changes arrive on
the lobby channel and are pushed to every lobby watcher of this node (:class:`Lobby` owns them,
and subscribes to the channel only while it has some). Quick join picks an open table with a
free seat or creates one; new tables and solitaire sessions are created by hosting
(``blackdrez.server.node.hosting``), which also puts a ranked game on its leaderboards (its
``rank``, an outbox step). The bots a host adds at a table are ``blackdrez.server.node.bots``'s
(``TableBots``, owned by hosting).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec

from blackdrez.games.shuffle import commitment
from blackdrez.protocol import v1
from blackdrez.protocol.codec import encode
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server import bus
from blackdrez.server.connection import Connection
from blackdrez.server.node.clock import Clock
from blackdrez.server.node.routing import SOLITAIRE_GRACE
from blackdrez.server.node.seams import Route, Spawn, error_answer, refused
from blackdrez.server.stores import Stores, StoreUnavailable
from blackdrez.server.stores.base import LOBBY_CHANNEL, Whereabouts
from blackdrez.server.table import assist
from blackdrez.server.table.commands import (
    Answer,
    Begin,
    joined,
)
from blackdrez.server.table.room import RoomError

if TYPE_CHECKING:
    from blackdrez.server.node.hosting import Hosting

log = logging.getLogger("blackdrez.node")

_entry_decoder = msgspec.msgpack.Decoder(v1.LeaderboardEntry)

_kept_decoder = msgspec.msgpack.Decoder(assist.KeptRecord)


DAILY_RUNNING = "your ranked game of today's deal is still being played: finish it first"

LOBBY_LINGER = 30.0
"""Seconds a node stays subscribed to the lobby channel after its last lobby watcher left (a
browser that reloads the page is back within them)."""


class Lobby:
    """The lobby and the requests that create or fill tables."""

    def __init__(
        self, store: Stores, clock: Clock, hosting: Hosting, *, route: Route, spawn: Spawn
    ) -> None:
        self.store = store
        self.clock = clock
        self.hosting = hosting
        """Where new tables and solitaire sessions are created and their first commands run."""
        self._route = route
        """Sends a table request here or to its host (``Routing.route``): a quick join."""
        self._spawn = spawn
        self.watchers: set[Connection] = set()
        """The connections here that watch the lobby."""
        self._heard = False
        """Subscribed to the lobby channel: only while someone here watches the lobby (and
        :data:`LOBBY_LINGER` seconds after), as every listed table's changes come that way."""
        self._subscribing = asyncio.Lock()
        self._linger: asyncio.Task[None] | None = None
        """Waiting to unsubscribe from the lobby channel (the last lobby watcher left)."""

    async def watch(self, client: Connection, message: v1.WatchLobby) -> Answer:
        """``client`` watches the lobby from now on: the table list, then its changes."""
        await self._hear()  # before the list: no change falls between the two
        tables = await self.list_tables()
        client.lobby = True
        self.watchers.add(client)
        return Answer(replies=[v1.Tables(id=message.id, tables=tables)])

    def unwatch(self, client: Connection, message: v1.UnwatchLobby) -> Answer:
        """``client`` no longer watches the lobby."""
        client.lobby = False
        self.stop_watching(client)
        return Answer(replies=[v1.Ok(id=message.id)])

    async def catch_up(self) -> None:
        """After a bus outage: the lobby's changes published meanwhile are lost, so give every
        lobby watcher here the whole list again."""
        if self.watchers:
            with contextlib.suppress(StoreUnavailable):
                tables = v1.Tables(tables=await self.list_tables())
                for client in list(self.watchers):
                    client.send(tables)

    async def start_solitaire(self, client: Connection, message: v1.StartSolitaire) -> Answer:
        """A new solitaire session hosted here, its game begun: a random deal (ranked), a
        numbered deal (public seed: never ranked), or today's daily deal (ranked the first time
        the player starts it that day; tried again only once that ranked game has ended)."""
        if message.daily and message.deal is not None:
            return error_answer(message, ErrorCode.BAD_MESSAGE, "a daily deal has no deal number")
        options = v1.TableOptions(grace_seconds=SOLITAIRE_GRACE, private=True)
        day = seed = None
        ranked = message.deal is None
        rank: Callable[[str], Awaitable[bool]] | None = None
        if message.daily:
            day = assist.day_of(self.clock.time())
            seed = await self.store.daily.seed(message.game, day, self.hosting.seed_source())
            assert seed is not None  # (a candidate was given)
            # Asked before a table is leased (a refusal costs no keys); the claim, once it is,
            # asks again: another node may have claimed the deal meanwhile.
            first = await self.store.daily.table(message.game, day, client.player)
            if first is not None and await self._still_played(first):
                return error_answer(message, ErrorCode.GAME_RUNNING, DAILY_RUNNING)
            rank = functools.partial(self._claim_daily, message.game, day, client.player)
        try:
            room = await self.hosting.new_room(
                message.game,
                client.player,
                options,
                message.deal,
                daily=day,
                ranked=ranked,
                rank=rank,
            )
        except RoomError as error:
            return error_answer(message, error.code, error.message)
        for step in (v1.JoinTable(id=message.id, table=room.id), Begin()):
            answer = await self.hosting.execute(room, client.player, client.name, step, seed=seed)
            if refused(answer):
                return answer  # the store failed: the error says why
        room = self.hosting.rooms.get(room.id, room)
        return joined(room, client.player, message.id, 0)

    async def _claim_daily(self, game: str, day: str, player: str, table: str) -> bool:
        """Claim ``game``'s daily deal of ``day`` for ``player`` at ``table`` (leased already):
        whether that session is ranked (the player's first of the deal). A later session waits
        until the ranked game has ended (:class:`RoomError` ``game_running``): it would show that
        game's cards to come (the same stock, dealt face up there) before they are dealt in it.
        The claim and the check agree on every node: the claim is atomic in the store and names
        the ranked session's table, which is leased before it is named."""
        # Kept until a day after the deal's day ends (no session of it starts after the day;
        # the day after covers clocks a little apart), then forgotten: only the seed is kept.
        keep = max(assist.day_bounds(day)[1] - self.clock.time(), 0.0) + assist.DAY
        first = await self.store.daily.claim(game, day, player, table, keep)
        if first == table:
            return True
        if first is not None and await self._still_played(first):
            raise RoomError(ErrorCode.GAME_RUNNING, DAILY_RUNNING)
        return False

    async def _still_played(self, table: str) -> bool:
        """Whether ``table``'s game is still being played: its record says so, or it has none
        yet while it is hosted (being created: its lease was taken first) or moving. Retired
        (closed) or gone, it is not."""
        await self.hosting.settled()  # read your own writes: a game just ended here has ended
        found = await self.store.lobby.get(table)
        if found is not None:
            info = msgspec.msgpack.decode(found[1], type=v1.TableInfo)
            return info.status not in ("finished", "closed")
        place = await self.store.leases.locate(table)
        return place.where in (Whereabouts.HOSTED, Whereabouts.MOVING)

    async def daily(self, message: v1.GetDaily) -> Answer:
        """A day's daily deal: its commitment, and its seed once the day has ended. A day
        that ended without one was never dealt: none is made for it now (every day's seed is
        kept for good, so a client asking for each past day would add a key per day)."""
        now = self.clock.time()
        day = message.day or assist.day_of(now)
        starts, ends = assist.day_bounds(day)
        if starts > now:
            return error_answer(
                message, ErrorCode.SEALED, f"the daily deal of {day} is not dealt yet"
            )
        candidate = self.hosting.seed_source() if now < ends else None
        seed = await self.store.daily.seed(message.game, day, candidate)
        if seed is None:
            return error_answer(
                message, ErrorCode.NOT_FOUND, f"nobody was dealt the daily deal of {day}"
            )
        daily = v1.Daily(
            id=message.id,
            game=message.game,
            day=day,
            commitment=commitment(seed),
            starts=starts,
            ends=ends,
            seed=None if assist.sealed(day, now) else seed,
        )
        return Answer(replies=[daily])

    async def kept_record(self, message: v1.GetRecord) -> Answer:
        """A ranked game's record; a daily deal's stays sealed until its day has ended."""
        data = await self.store.leaderboards.kept_record(message.record)
        if data is None:
            return error_answer(message, ErrorCode.NOT_FOUND, f"no game record {message.record!r}")
        kept = _kept_decoder.decode(data)
        if assist.sealed(kept.daily, self.clock.time()):
            return error_answer(
                message,
                ErrorCode.SEALED,
                f"the record of a daily deal is sealed until the day {kept.daily} has ended (UTC)",
            )
        text = kept.record.decode()
        return Answer(replies=[v1.GameRecord(id=message.id, record=message.record, text=text)])

    async def quick_join(self, client: Connection, message: v1.QuickJoin) -> Answer:
        for info in await self.list_tables():
            if (
                info.game == v1.TABLE_GAME
                and info.status == "open"
                and not info.private
                and any(seat is None for seat in info.seats)
                and all(seat is None or seat.player != client.player for seat in info.seats)
            ):
                answer = await self._route(
                    client.player,
                    client.name,
                    info.id,
                    v1.JoinTable(id=message.id, table=info.id),
                    bot=client.bot,
                )
                if not refused(answer):
                    return answer
        return await self.create_and_sit(client, v1.TableOptions(), message.id)

    async def create_and_sit(
        self,
        client: Connection,
        options: v1.TableOptions,
        request_id: int | None,
        spectator_chat: bool = True,
    ) -> Answer:
        """A new BlackDrez table hosted here, with its creator in the first seat as host."""
        room = await self.hosting.new_room(
            v1.TABLE_GAME, client.player, options, None, spectator_chat=spectator_chat
        )
        sit = v1.JoinTable(id=request_id, table=room.id)
        return await self.hosting.execute(room, client.player, client.name, sit, bot=client.bot)

    async def list_tables(self) -> list[v1.TableInfo]:
        """The public tables of every node."""
        records = await self.store.lobby.listed()
        return [msgspec.msgpack.decode(record, type=v1.TableInfo) for record in records]

    async def _hear(self) -> None:
        """Subscribe to the lobby channel unless subscribed (:class:`StoreUnavailable` if the
        bus cannot be reached). Every change of every listed table comes that way, so a node
        hears it only while someone here watches the lobby: on Redis a node would otherwise
        read back, through the pub/sub client, the lobby change of most of its own actions."""
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        async with self._subscribing:
            if not self._heard:
                await self.store.bus.subscribe(LOBBY_CHANNEL, self._on_lobby_message)
                self._heard = True

    def stop_watching(self, client: Connection) -> None:
        """``client`` no longer watches the lobby; the last one gone, the node unsubscribes
        :data:`LOBBY_LINGER` seconds later unless a watcher came back meanwhile."""
        self.watchers.discard(client)
        if not self.watchers and self._heard and self._linger is None:
            self._linger = self._spawn(self._stop_hearing())

    async def _stop_hearing(self) -> None:
        await asyncio.sleep(LOBBY_LINGER)
        self._linger = None
        async with self._subscribing:
            if self._heard and not self.watchers:
                self._heard = False
                await self.store.bus.unsubscribe(LOBBY_CHANNEL, self._on_lobby_message)

    def _on_lobby_message(self, data: bytes) -> None:
        if not self.watchers:
            return
        try:
            message = bus.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable lobby update dropped")
            return
        if not isinstance(message, bus.LobbyChanged):
            return
        update = message.update
        frames: dict[bool, str | bytes] = {}
        for client in list(self.watchers):
            frame = frames.get(client.binary)
            if frame is None:
                frame = frames[client.binary] = encode(update, client.binary)
            client.send_frame(frame)

    async def leaderboard(self, message: v1.GetLeaderboard) -> Answer:
        """One leaderboard: a game's ranked results of one kind of deal, period and help."""
        await self.hosting.settled()  # read your own writes: scores of games just finished
        name = assist.board(message.game, message.deal, message.assisted, message.day)
        rows = await self.store.leaderboards.top(name, message.limit)
        entries = [
            msgspec.structs.replace(_entry_decoder.decode(entry), rank=i + 1)
            for i, (_, entry, _) in enumerate(rows)
        ]
        board = v1.Leaderboard(
            id=message.id,
            game=message.game,
            entries=entries,
            deal=message.deal,
            day=message.day,
            assisted=message.assisted,
        )
        return Answer(replies=[board])
