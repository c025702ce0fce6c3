"""Who is at a table: its seats, spectators and host (:class:`Seating`), and who played each
seat of the current game (:class:`Roster`).

Theory of operation
-------------------
:class:`Seating` owns the seats and everything about the people in them: presence, readiness,
leaving, the host (handed to another human when the host's seat is freed, or to the next human
to sit when none is left), the spectators, the invite of a private table, and at a rated table
the seated players' ratings. It emits the seat events itself (``seat_freed``, ``ready_changed``,
``presence``) into the room's :class:`~blackdrez.server.table.history.EventLog`; the room decides
when (its commands and the lifecycle).

:class:`Roster` remembers who played the current game at each seat, kept when they leave before
its end: a player who quits is still ranked, and rated. A seat whose player played a round
(``GameSpec.has_played``) *holds a result*: at a rated table nobody else may sit there until the
game ends (:meth:`Roster.reserved_for`), so leaving never takes a rated game off a rating.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from blackdrez.games.spec import GameSpec
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.table import parts
from blackdrez.server.table.history import EventLog
from blackdrez.server.table.lifecycle import RoomError

Leaving = Literal["left", "timeout", "kicked"]
"""Why a seat is given up (``seat_freed.reason``)."""
SeatPlayer = tuple[int, str, str, bool]
"""``(seat, player, name, bot)``: who played a seat of a game."""


class Seat:
    """A seated player. Compiled (``blackdrez compile --core``), an extension type whose
    attributes ``seating.pxd`` declares, read directly by the seating's and the room's loops
    over the seats."""

    def __init__(
        self,
        player: str,
        name: str,
        ready: bool = False,
        connected: bool = True,
        bot: bool = False,
        leaving: bool = False,
        leaving_reason: Leaving = "left",
        away_since: float | None = None,
    ) -> None:
        self.player = player
        self.name = name
        self.ready = ready
        self.connected = connected
        self.bot = bot
        self.leaving = leaving
        """Asked to leave during a round: plays the default action at each turn, freed once
        out of the round."""
        self.leaving_reason = leaving_reason
        """Why the seat is being given up (``seat_freed.reason``)."""
        self.away_since = away_since

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        parts.restore(self, pickled)

    def __repr__(self) -> str:
        return f"Seat({self.player!r}, {self.name!r}, ready={self.ready}, bot={self.bot})"


class Seating:
    """The seats, spectators and host of one table (see the module docstring)."""

    def __init__(self, count: int, host: str, invite: str | None, log: EventLog) -> None:
        self.seats: list[Seat | None] = [None] * count
        self.spectators: set[str] = set()
        self.host = host
        self.host_left = False
        """The host gave up their seat and no human was left to take over: the next human to sit
        becomes the host (a table whose host is gone can still start a game)."""
        self.humans_came = False
        """A human has sat at this table: from then on bots alone do not keep it open."""
        self.invite = invite
        """A private table's invite code (``None``: anyone may sit)."""
        self.ratings: dict[str, v1.SeatRating] = {}
        """At a rated table: the seated players' ratings, as the host node last read them from
        the records (``Room.set_ratings``)."""
        self._log = log

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        parts.restore(self, pickled)

    # ------------------------------------------------------------------ queries
    def seat_of(self, player: str) -> int | None:
        """The seat ``player`` holds, or ``None``."""
        for index, seat in enumerate(self.seats):
            if seat is not None and seat.player == player:
                return index
        return None

    def required(self, player: str) -> int:
        """The seat ``player`` holds; :class:`RoomError` when they hold none."""
        seat = self.seat_of(player)
        if seat is None:
            raise RoomError(ErrorCode.NOT_SEATED, "you have no seat at this table")
        return seat

    def leaving(self, seat: int) -> bool:
        """Whether the player in ``seat`` is leaving it."""
        occupant = self.seats[seat]
        return occupant is not None and occupant.leaving

    def deserted(self) -> bool:
        """No human holds a seat (see ``lifecycle``, note 1)."""
        humans_came = self.humans_came
        for s in self.seats:  # noqa: SIM110  (a loop, not a generator: after every command)
            if s is not None and not (humans_came and s.bot):
                return False
        return True

    def round_seats(self) -> list[int]:
        """The seats that play the next round: ready, and not leaving."""
        found = []
        for i, s in enumerate(self.seats):  # (a loop over typed seats, compiled)
            if s is not None and not s.leaving and s.ready:
                found.append(i)
        return found

    def leaving_seats(self) -> list[int]:
        """The seats whose players are leaving (nearly always none)."""
        found = []
        for i, s in enumerate(self.seats):  # (a loop over typed seats, compiled)
            if s is not None and s.leaving:
                found.append(i)
        return found

    def infos(self, rated: bool) -> list[v1.SeatInfo | None]:
        """The seats as the lobby shows them (with each player's rating at a rated table)."""
        ratings = self.ratings
        found: list[v1.SeatInfo | None] = []
        for s in self.seats:  # (a loop over typed seats, compiled)
            if s is None:
                found.append(None)
            else:
                found.append(
                    v1.SeatInfo(
                        player=s.player,
                        name=s.name,
                        ready=s.ready,
                        connected=s.connected,
                        bot=s.bot,
                        rating=ratings.get(s.player) if rated else None,
                    )
                )
        return found

    def ready_seats(self) -> list[int]:
        """The seats whose players are ready."""
        return [i for i, s in enumerate(self.seats) if s is not None and s.ready]

    def check_invite(self, player: str, invite: str | None) -> None:
        """:class:`RoomError` unless ``player`` may come to this table with ``invite``."""
        if self.invite is not None and player != self.host and invite != self.invite:
            raise RoomError(ErrorCode.INVITE_REQUIRED, "this table is private: an invite is needed")

    def is_host(self, player: str) -> bool:
        """Whether ``player`` may act as the host (not once they left, nor while they leave:
        the next human to sit down becomes host)."""
        if player != self.host or self.host_left:
            return False
        seat = self.seat_of(player)
        return seat is None or not self.leaving(seat)

    def watched_seat(self, player: str) -> int | None:
        """The seat whose copy ``player`` watches: theirs, unless they are leaving it and
        watch as a spectator meanwhile (``None``)."""
        seat = self.seat_of(player)
        if seat is not None and self.leaving(seat) and player in self.spectators:
            return None
        return seat

    def bot_names(
        self,
        count: int,
        strategy: str,
        skip: int,
        names: Sequence[str],
        labels: Mapping[str, str],
    ) -> list[str]:
        """``count`` display names for new bots, none used at this table yet: a first name from
        ``names`` (after the first ``skip``, cycled) and the bot's strategy as ``labels`` say."""
        skip %= len(names)
        taken = {s.name.split(" (")[0] for s in self.seats if s is not None}
        free = [n for n in [*names[skip:], *names[:skip]] if n not in taken]
        label = labels.get(strategy, strategy)
        return [f"{free[i % len(free)]} ({label})" for i in range(count)]

    def key(self) -> tuple[Any, ...]:
        """Everything here a command can change, as one comparable value (``commands.state_key``;
        spectators come and go one per command, so their count will do)."""
        seats: list[Any] = []
        for s in self.seats:  # (a loop over typed seats, compiled: see seating.pxd)
            if s is None:
                seats.append(None)
            else:
                seats.append(
                    (
                        s.player,
                        s.name,
                        s.ready,
                        s.connected,
                        s.bot,
                        s.leaving,
                        s.leaving_reason,
                        s.away_since,
                    )
                )
        return (
            self.host,
            self.host_left,
            self.humans_came,
            len(self.spectators),
            tuple(seats),
            tuple(sorted(self.ratings.items())),
        )

    # ------------------------------------------------------------------ changes
    def mark_ready(self, seat: int, ready: bool) -> None:
        """The player in ``seat`` is ready (or not) to play."""
        occupant = self.seats[seat]
        assert occupant is not None
        if occupant.ready != ready:
            occupant.ready = ready
            self._log.emit(v1.ReadyChanged(seat=seat, ready=ready))

    def connect(self, seat: int, connected: bool, now: float) -> None:
        """The connection of the player in ``seat`` dropped or came back."""
        occupant = self.seats[seat]
        assert occupant is not None
        if occupant.connected != connected:
            occupant.connected = connected
            occupant.away_since = None if connected else now
            self._log.emit(v1.PresenceChanged(seat=seat, connected=connected))

    def free(self, seat: int, reason: Leaving) -> str:
        """Free ``seat`` (its player leaves the table) and return who held it; a leaving host
        hands over to another human, or to the next to sit."""
        occupant = self.seats[seat]
        assert occupant is not None
        self.seats[seat] = None
        self.ratings.pop(occupant.player, None)
        self._log.emit(v1.SeatFreed(seat=seat, reason=reason))
        if occupant.player == self.host:
            others = [s for s in self.seats if s is not None and not s.bot]
            if others:
                self.host = others[0].player
            else:
                self.host_left = True
        return occupant.player


class Roster:
    """Who played each seat of the current game (see the module docstring)."""

    def __init__(self, spec: GameSpec) -> None:
        self.spec = spec
        self.players: dict[int, SeatPlayer] = {}

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        parts.restore(self, pickled)

    def holds_result(self, index: int, engine: Any) -> bool:
        """Whether seat ``index`` has a result in the current game (it played a round) that
        belongs to the player noted there."""
        return index in self.players and engine is not None and self.spec.has_played(engine, index)

    def reserved_for(self, index: int, engine: Any) -> str | None:
        """During a rated game (the caller checks), the player whose result seat ``index`` holds:
        they played a round there, then left."""
        return self.players[index][1] if self.holds_result(index, engine) else None

    def credit(self, index: int, seat: Seat) -> None:
        """Note the player in seat ``index`` as its player in the current game (a player who
        moved seats is kept at the latest one only)."""
        for other, (_, player, _, _) in list(self.players.items()):
            if player == seat.player and other != index:
                del self.players[other]
        self.players[index] = (index, seat.player, seat.name, seat.bot)

    def note(self, seats: Sequence[Seat | None], engine: Any) -> None:
        """Note who holds each seat now as its player in the current game, except where the
        seat's result is a player's who played its rounds (they keep it, whoever sits there
        now), and except a player who has such a result at another seat."""
        for index, s in enumerate(seats):
            if s is None or self.holds_result(index, engine):
                continue
            if any(
                player == s.player and self.holds_result(other, engine)
                for other, (_, player, _, _) in self.players.items()
            ):
                continue
            self.credit(index, s)
