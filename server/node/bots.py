"""The bots the host adds at a table: named by the game, started by the server, seats held.

Theory of operation
-------------------
``add_bots`` at a hosted table asks :class:`TableBots` (owned by hosting): it names the bots
(the game's names, never one given twice at a table), starts each through the server's
``spawn_bot`` (the server gets the bot client from whoever started it) and holds a seat for each
until it sits down, or :data:`BOT_ARRIVAL` passes; while seats are held, anyone else asking to
sit is refused when every free seat is held.
"""

from __future__ import annotations

from collections.abc import Callable

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.node.clock import Clock
from blackdrez.server.node.seams import error_answer
from blackdrez.server.table.commands import Answer
from blackdrez.server.table.room import Room, RoomError

BOT_ARRIVAL = 10.0
"""Seconds a bot the host added holds a seat while it connects and sits down: ``add_bots``
counts it as seated meanwhile (quick requests would start more bots than there are seats), and
nobody else may take the seat (see ``TableBots.claim_held_seat``)."""

SpawnBot = Callable[[str, str, str | None, str], str]
"""Starts one bot client ``(table, strategy, invite, name)`` and returns the player id it will
sit down as (given by the server, which knows its own address and signs the bot's session
token)."""


class TableBots:
    """The bots the host added at each hosted table: named here, started by the server, their
    seats held until they come."""

    def __init__(self, clock: Clock, spawn_bot: SpawnBot | None = None) -> None:
        self.clock = clock
        self._spawn_bot = spawn_bot
        """Starts one bot client (``None``: this server cannot start bots)."""
        self._named: dict[str, int] = {}
        """Per hosted table, how many bots were named so far (see :meth:`add`)."""
        self.coming: dict[str, dict[str, float]] = {}
        """Per table, the player id of each bot the host added and not seated yet, and until
        when (monotonic) it holds a seat (see :meth:`add`)."""

    def forget(self, table: str) -> None:
        """``table`` is no longer hosted here."""
        self._named.pop(table, None)
        self.coming.pop(table, None)

    def add(self, room: Room, player: str, message: v1.AddBots) -> Answer:
        """Start the bots ``player`` (the host) asks for at ``room``, holding their seats until
        they come; the answer (``ok``, or the refusal)."""
        if self._spawn_bot is None:  # a server given no bot client: refused, nothing changed
            return error_answer(message, ErrorCode.UNAVAILABLE, "this server cannot start bots")
        now = self.clock.monotonic()  # bots added before and not seated yet hold their seats
        coming = self._seats_held(room.id, now)
        try:
            count = room.bot_seats(player, message.count, len(coming))
        except RoomError as error:
            return error_answer(message, error.code, error.message)
        # Names are picked before the bots sit down: skip the names given here before, so two
        # quick requests do not name two bots alike.
        spawned = self._named.get(room.id, 0)
        self._named[room.id] = spawned + count
        for name in room.bot_names(count, message.strategy, skip=spawned):
            bot = self._spawn_bot(room.id, message.strategy, room.invite, name)
            coming[bot] = now + BOT_ARRIVAL
        self.coming[room.id] = coming
        return Answer(replies=[v1.Ok(id=message.id, seq=room.seq)])

    def _seats_held(self, table: str, now: float) -> dict[str, float]:
        """The bots the host added that have not come yet and still hold a seat (their player
        ids, and until when); the held seats of bots that never came are free again."""
        coming = {bot: until for bot, until in self.coming.pop(table, {}).items() if until > now}
        if coming:
            self.coming[table] = coming
        return coming

    def claim_held_seat(self, room: Room, player: str, message: v1.JoinTable) -> Answer | None:
        """``player`` asks to sit down at a table where the host added bots: a bot the server
        started for it comes (no longer on its way, whether it sits down or is refused), and
        anyone else (a person, someone else's bot) is refused when every free seat is held.
        The answer refusing the request, or ``None`` to go on."""
        coming = self._seats_held(room.id, self.clock.monotonic())
        if coming.pop(player, None) is not None:
            if not coming:
                del self.coming[room.id]
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
