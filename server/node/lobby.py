"""Lobby: the table list, quick join, create-and-sit, bots at a table, the lobby pushes.

Theory of operation
-------------------
The table list comes from the store's lobby (every node's listed tables); its changes arrive on
the lobby channel and are pushed to every lobby watcher of this node. Quick join picks an open
table with a free seat or creates one; bots are named here and started by the server's
``spawn_bot`` (the server gets the bot client from whoever started it).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable

import msgspec

from blackdrez.games.blackdrez.bots import BOT_NAMES
from blackdrez.games.shuffle import commitment
from blackdrez.protocol import v1
from blackdrez.protocol.codec import encode
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server import bus
from blackdrez.server.connection import Connection
from blackdrez.server.node.routing import SOLITAIRE_GRACE, error_answer, refused
from blackdrez.server.stores.base import LOBBY_CHANNEL, Whereabouts
from blackdrez.server.table import assist
from blackdrez.server.table.commands import (
    Answer,
    Begin,
    joined,
)
from blackdrez.server.table.room import Room, RoomError

log = logging.getLogger("blackdrez.node")

_entry_decoder = msgspec.msgpack.Decoder(v1.LeaderboardEntry)

_kept_decoder = msgspec.msgpack.Decoder(assist.KeptRecord)

BOT_ARRIVAL = 10.0
"""Seconds a bot the host added holds a seat while it connects and sits down: ``add_bots``
counts it as seated meanwhile (quick requests would start more bots than there are seats), and
nobody else may take the seat (see ``Lobby._claim_held_seat``)."""

DAILY_RUNNING = "your ranked game of today's deal is still being played: finish it first"

LOBBY_LINGER = 30.0
"""Seconds a node stays subscribed to the lobby channel after its last lobby watcher left (a
browser that reloads the page is back within them)."""


class Lobby:
    """The lobby and the requests that create or fill tables."""

    async def _start_solitaire(self, client: Connection, message: v1.StartSolitaire) -> Answer:
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
            day = assist.day_of(self.clock())
            seed = await self.store.daily_seed(message.game, day, self.seed_source())
            assert seed is not None  # (a candidate was given)
            # Asked before a table is leased (a refusal costs no keys); the claim, once it is,
            # asks again: another node may have claimed the deal meanwhile.
            first = await self.store.daily_table(message.game, day, client.player)
            if first is not None and await self._still_played(first):
                return error_answer(message, ErrorCode.GAME_RUNNING, DAILY_RUNNING)
            rank = functools.partial(self._claim_daily, message.game, day, client.player)
        try:
            room = await self._new_room(
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
            answer = await self._execute(room, client.player, client.name, step, seed=seed)
            if refused(answer):
                return answer  # the store failed: the error says why
        room = self.rooms.get(room.id, room)
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
        keep = max(assist.day_bounds(day)[1] - self.clock(), 0.0) + assist.DAY
        first = await self.store.claim_daily(game, day, player, table, keep)
        if first == table:
            return True
        if first is not None and await self._still_played(first):
            raise RoomError(ErrorCode.GAME_RUNNING, DAILY_RUNNING)
        return False

    async def _still_played(self, table: str) -> bool:
        """Whether ``table``'s game is still being played: its record says so, or it has none
        yet while it is hosted (being created: its lease was taken first) or moving. Retired
        (closed) or gone, it is not."""
        await self._settled()  # read your own writes: a game just ended here has ended
        found = await self.store.get_table(table)
        if found is not None:
            info = msgspec.msgpack.decode(found[1], type=v1.TableInfo)
            return info.status not in ("finished", "closed")
        place = await self.store.locate(table)
        return place.where in (Whereabouts.HOSTED, Whereabouts.MOVING)

    async def _daily(self, message: v1.GetDaily) -> Answer:
        """A day's daily deal: its commitment, and its seed once the day has ended. A day
        that ended without one was never dealt: none is made for it now (every day's seed is
        kept for good, so a client asking for each past day would add a key per day)."""
        now = self.clock()
        day = message.day or assist.day_of(now)
        starts, ends = assist.day_bounds(day)
        if starts > now:
            return error_answer(
                message, ErrorCode.SEALED, f"the daily deal of {day} is not dealt yet"
            )
        candidate = self.seed_source() if now < ends else None
        seed = await self.store.daily_seed(message.game, day, candidate)
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

    async def _kept_record(self, message: v1.GetRecord) -> Answer:
        """A ranked game's record; a daily deal's stays sealed until its day has ended."""
        data = await self.store.kept_record(message.record)
        if data is None:
            return error_answer(message, ErrorCode.NOT_FOUND, f"no game record {message.record!r}")
        kept = _kept_decoder.decode(data)
        if assist.sealed(kept.daily, self.clock()):
            return error_answer(
                message,
                ErrorCode.SEALED,
                f"the record of a daily deal is sealed until the day {kept.daily} has ended (UTC)",
            )
        text = kept.record.decode()
        return Answer(replies=[v1.GameRecord(id=message.id, record=message.record, text=text)])

    async def _rank(self, result: assist.Finished) -> None:
        """Put a ranked game on its boards (its day's and all time's) with its record;
        idempotent, like every outbox step (a retry submits the same entries)."""
        if result.ranked_at is None:
            result.ranked_at = self.clock()
        now = result.ranked_at
        day = result.daily or assist.day_of(now)
        deal = "daily" if result.daily else "random"
        kept = msgspec.msgpack.encode(assist.KeptRecord(daily=result.daily, record=result.record))
        # Kept for a while first (a board never links to a record not there), for good once
        # the game is on a board: one that beat none of the player's entries is not kept.
        await self.store.keep_record(result.id, kept, self.record_retention)
        entry = v1.LeaderboardEntry(
            rank=0,
            player=result.player,
            name=result.name,
            score=result.score,
            won=result.won,
            day=day,
            deal=deal,
            hints=result.hints,
            undos=result.undos,
            record=result.id,
            finished=now,
        )
        data = msgspec.msgpack.encode(entry)
        assisted = bool(result.hints or result.undos)
        placed = False
        for period in (day, None):
            name = assist.board(result.game, deal, assisted, period)
            placed |= await self.store.submit_score(name, result.player, data, result.score)
        if placed:
            await self.store.keep_record(result.id, kept)

    async def _quick_join(self, client: Connection, message: v1.QuickJoin) -> Answer:
        for info in await self.list_tables():
            if (
                info.game == v1.TABLE_GAME
                and info.status == "open"
                and not info.private
                and any(seat is None for seat in info.seats)
                and all(seat is None or seat.player != client.player for seat in info.seats)
            ):
                answer = await self.route(
                    client.player,
                    client.name,
                    info.id,
                    v1.JoinTable(id=message.id, table=info.id),
                    bot=client.bot,
                )
                if not refused(answer):
                    return answer
        return await self._create_and_sit(client, v1.TableOptions(), message.id)

    async def _create_and_sit(
        self, client: Connection, options: v1.TableOptions, request_id: int | None
    ) -> Answer:
        """A new BlackDrez table hosted here, with its creator in the first seat as host."""
        room = await self._new_room(v1.TABLE_GAME, client.player, options, None)
        sit = v1.JoinTable(id=request_id, table=room.id)
        return await self._execute(room, client.player, client.name, sit, bot=client.bot)

    async def list_tables(self) -> list[v1.TableInfo]:
        """The public tables of every node."""
        records = await self.store.list_tables()
        return [msgspec.msgpack.decode(record, type=v1.TableInfo) for record in records]

    def _add_bots(self, room: Room, player: str, message: v1.AddBots) -> Answer:
        if self.spawn_bot is None:  # a server given no bot client: refused, nothing changed
            return error_answer(message, ErrorCode.UNAVAILABLE, "this server cannot start bots")
        now = time.monotonic()  # bots added before and not seated yet hold their seats
        coming = self._seats_held(room.id, now)
        try:
            count = room.bot_seats(player, message.count, len(coming))
        except RoomError as error:
            return error_answer(message, error.code, error.message)
        # Names are picked before the bots sit down: skip the names given here before, so two
        # quick requests do not name two bots alike.
        spawned = self._bots_named.get(room.id, 0)
        self._bots_named[room.id] = spawned + count
        for name in room.bot_names(count, message.strategy, skip=spawned % len(BOT_NAMES)):
            bot = self.spawn_bot(room.id, message.strategy, room.invite, name)
            coming[bot] = now + BOT_ARRIVAL
        self._bots_coming[room.id] = coming
        return Answer(replies=[v1.Ok(id=message.id, seq=room.seq)])

    def _seats_held(self, table: str, now: float) -> dict[str, float]:
        """The bots the host added that have not come yet and still hold a seat (their player
        ids, and until when); the held seats of bots that never came are free again."""
        coming = {
            bot: until for bot, until in self._bots_coming.pop(table, {}).items() if until > now
        }
        if coming:
            self._bots_coming[table] = coming
        return coming

    def _claim_held_seat(self, room: Room, player: str, message: v1.JoinTable) -> Answer | None:
        """``player`` asks to sit down at a table where the host added bots: a bot the server
        started for it comes (no longer on its way, whether it sits down or is refused), and
        anyone else (a person, someone else's bot) is refused when every free seat is held.
        The answer refusing the request, or ``None`` to go on."""
        coming = self._seats_held(room.id, time.monotonic())
        if coming.pop(player, None) is not None:
            if not coming:
                del self._bots_coming[room.id]
            return None
        if not coming or room.seat_of(player) is not None:
            return None
        if sum(1 for seat in room.seats if seat is None) > len(coming):
            return None
        return error_answer(
            message,
            ErrorCode.TABLE_FULL,
            "every free seat is held for a bot the host added (on its way)",
        )

    async def _hear_lobby(self) -> None:
        """Subscribe to the lobby channel unless subscribed (:class:`StoreUnavailable` if the
        bus cannot be reached). Every change of every listed table comes that way, so a node
        hears it only while someone here watches the lobby: on Redis a node would otherwise
        read back, through the pub/sub client, the lobby change of most of its own actions."""
        if self._lobby_linger is not None:
            self._lobby_linger.cancel()
            self._lobby_linger = None
        async with self._lobby_subscribing:
            if not self._lobby_heard:
                await self.store.subscribe(LOBBY_CHANNEL, self._on_lobby_message)
                self._lobby_heard = True

    def _stop_watching_lobby(self, client: Connection) -> None:
        """``client`` no longer watches the lobby; the last one gone, the node unsubscribes
        :data:`LOBBY_LINGER` seconds later unless a watcher came back meanwhile."""
        self.lobby_watchers.discard(client)
        if not self.lobby_watchers and self._lobby_heard and self._lobby_linger is None:
            self._lobby_linger = self._spawn(self._stop_hearing_lobby())

    async def _stop_hearing_lobby(self) -> None:
        await asyncio.sleep(LOBBY_LINGER)
        self._lobby_linger = None
        async with self._lobby_subscribing:
            if self._lobby_heard and not self.lobby_watchers:
                self._lobby_heard = False
                await self.store.unsubscribe(LOBBY_CHANNEL, self._on_lobby_message)

    def _on_lobby_message(self, data: bytes) -> None:
        if not self.lobby_watchers:
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
        for client in list(self.lobby_watchers):
            frame = frames.get(client.binary)
            if frame is None:
                frame = frames[client.binary] = encode(update, client.binary)
            client.send_frame(frame)

    async def _leaderboard(self, message: v1.GetLeaderboard) -> Answer:
        """One leaderboard: a game's ranked results of one kind of deal, period and help."""
        await self._settled()  # read your own writes: scores of games just finished
        name = assist.board(message.game, message.deal, message.assisted, message.day)
        rows = await self.store.top_scores(name, message.limit)
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
