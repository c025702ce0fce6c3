"""One table (or solitaire session) as plain data and synchronous methods: no I/O, no asyncio.

Theory of operation
-------------------
A :class:`Room` holds the seats, the engine of the running game, the events kept for resync, and
the deadlines (turn timer, next deal, waiting for players, disconnect grace, closing). Every
command method takes the current time ``now`` and either raises :class:`RoomError` (nothing
changed) or changes the room and queues numbered events. The runtime
(:mod:`blackdrez.server.table.commands` and the node) calls :meth:`Room.flush` after each command to
get
one :class:`Broadcast` for every viewer, and calls :meth:`Room.tick` when
:meth:`Room.next_deadline` comes. :meth:`Room.state_key` tells whether a command changed anything
at all: one that changed nothing is neither logged nor broadcast.
Because every method is synchronous, one room's commands never interleave.

The lifecycle (statuses, transitions, which command each status allows) is in
:mod:`blackdrez.server.table.lifecycle`; :meth:`Room._check` looks every command up there first.

A room whose timer fires more than :data:`RUNAWAY_RATE` times a second (beyond a burst of
:data:`RUNAWAY_BURST`) is stopped (:class:`TimerBudget`; see
:func:`blackdrez.server.table.commands.timer_entry`): its host logs a ``stop`` that closes it, and
reports
it. A timer fires only when a deadline is due, and each firing uses one up, so no game comes near
that rate; the guard keeps a bug from ever spinning a node again. Players' requests are not
counted: each is one message of a rate-limited connection.

Visibility: every event is passed through the engine's ``event_view`` and the view through
``view``, both for the spectator (``None``): every game shows every card a player may see to
everyone (a test checks it for each game), so one copy serves all viewers and is encoded once;
only the legal actions differ, by seat.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.blackdrez.bots import BOT_NAMES, STRATEGY_LABELS
from blackdrez.games.spec import GameSpec
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.table.assist import (
    Assist,
    Finished,
    HintJob,
    day_bounds,
    forced_finish,
    hint_job,
    quick_hint,
    ranked_result,
)
from blackdrez.server.table.lifecycle import (
    ALLOWED,
    COMMANDS,
    GAME_RUNNING,
    IGNORED,
    TRANSITIONS,
    WIRE_STATUS,
    Refusal,
    TableCommand,
    TableStatus,
)

_INFO_EVENTS = (v1.SeatTaken, v1.SeatFreed, v1.ReadyChanged, v1.PresenceChanged, v1.TableClosed)

KEPT_EVENTS = 256
"""Events kept for ``resync``; a client further behind gets a snapshot."""
RECENT_EVENTS = 64
"""Events of the current game a snapshot carries as ``recent``, for the client's table log."""
RUNAWAY_RATE = 100.0
"""Timer firings per second a table may keep up (one per round or turn timeout at most)."""
RUNAWAY_BURST = 500.0
"""Timer firings a table may have at any speed before :data:`RUNAWAY_RATE` applies."""


REJECTIONS: dict[Reason, ErrorCode] = {
    Reason.NOT_YOUR_TURN: ErrorCode.NOT_YOUR_TURN,
    Reason.ILLEGAL: ErrorCode.ILLEGAL_ACTION,
    Reason.GAME_OVER: ErrorCode.GAME_OVER,
    Reason.NOT_IN_ROUND: ErrorCode.NOT_IN_ROUND,
    Reason.BAD_ACTION: ErrorCode.BAD_ACTION,
}
"""The error code of each reason an engine rejects an action for."""


class RoomError(Exception):
    """A request the room refuses; ``code`` goes on the wire. Nothing was changed."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Seat:
    """A seated player."""

    player: str
    name: str
    ready: bool = False
    connected: bool = True
    bot: bool = False
    leaving: bool = False
    """Asked to leave during a round: plays the default action at each turn, freed once out of
    the round."""
    leaving_reason: Literal["left", "timeout", "kicked"] = "left"
    """Why the seat is being given up (``seat_freed.reason``)."""
    away_since: float | None = None


class Broadcast(msgspec.Struct, kw_only=True):
    """Everything a table's viewers need after one command, for every viewer class at once.

    Every viewer sees the same events and view (all three games show every card a player may
    see to everyone); only ``legal`` differs, by seat.
    """

    table: str
    seq: int
    events: list[v1.Numbered]
    view: Any = None
    legal: dict[int, list[Any]] = {}
    deadline: float | None = None
    info: v1.TableInfo | None = None

    def for_seat(self, seat: int | None) -> v1.Update:
        """The ``update`` message for one viewer."""
        return v1.Update(
            table=self.table,
            seq=self.seq,
            events=self.events,
            view=self.view,
            legal=self.legal.get(seat, []) if seat is not None else [],
            deadline=self.deadline,
            info=self.info,
        )

    def variant(self, seat: int | None) -> int | None:
        """The viewer class of ``seat``: the seat itself if its copy differs, else ``None``."""
        if seat is not None and seat in self.legal:
            return seat
        return None


_kept_encoder = msgspec.msgpack.Encoder()


class _KeptEvent(msgspec.Struct, frozen=True, gc=False):
    """One event kept for ``resync``, in its encoded (MessagePack) form.

    A table keeps its last :data:`KEPT_EVENTS` events, and each lives for hundreds of actions:
    as objects (an event, its lists) they were most of what the garbage collector walked on a
    busy node (a young generation of about 95,000 objects, 70-120 ms a collection, with 300
    tables). Bytes are not tracked by the collector, nor is this struct (``gc=False``: it
    holds an int and bytes, so it can never be part of a cycle). :attr:`event` gives the wire
    form back (plain data, encoded to any client exactly as the event was).
    """

    seq: int
    data: bytes

    @property
    def event(self) -> Any:
        """The event in its wire form (dicts and lists, as a client decodes it)."""
        return msgspec.msgpack.decode(self.data)


@dataclass
class Outcome:
    """What the runtime must do besides broadcasting: side effects outside the room."""

    ranked: list[Finished] = field(default_factory=list)
    """Finished games of ranked solitaire sessions, for the leaderboards."""
    seated: list[str] = field(default_factory=list)
    unseated: list[str] = field(default_factory=list)
    closed: bool = False
    games_over: list[GameOver] = field(default_factory=list)
    """Games that ended, for the records (``blackdrez.server.records.writer``)."""


@dataclass(frozen=True)
class GameOver:
    """A game that ended at a table: what its record and the records database need.

    ``game_id`` is ``{table}:{n}`` for the table's n-th game: a replay of the log finds the same
    id, so a record written again after a failover is recognised as the same game.
    """

    game_id: str
    engine: Any
    """The finished engine (never changed again: the next game gets a new one)."""
    actions: list[tuple[int, Any]]
    """Every ``(seat, action)`` applied to it, system actions included."""
    players: list[tuple[int, str, str, bool]]
    """``(seat, player, name, bot)`` of each seat held when it ended."""
    started_at: float
    ended_at: float
    rated: bool
    sealed_until: float | None = None
    """A daily deal's game: the end of its day, before which its record (which holds the day's
    seed) must not be served."""
    scored: bool = False
    """A solitaire's game ranked on the leaderboards and played without help (no hint, no
    undo): only such a score may be the player's best in the records."""
    private: bool = False
    """Played at a private BlackDrez table (a solitaire session is unlisted, not private): its
    record is read by its players only."""


@dataclass
class TimerBudget:
    """A token bucket over a room's timer firings (see :data:`RUNAWAY_RATE`). It lives with the
    live room only: what it decides is logged as a command of its own."""

    tokens: float = RUNAWAY_BURST
    last: float | None = None

    def spend(self, now: float) -> bool:
        """Count one firing at ``now``; ``False`` when the timer fires faster than allowed."""
        if self.last is not None:
            self.tokens = min(RUNAWAY_BURST, self.tokens + max(0.0, now - self.last) * RUNAWAY_RATE)
        self.last = now
        self.tokens -= 1.0
        return self.tokens >= 0.0


class Room:
    """A table or solitaire session (see the module docstring)."""

    par_wanted: int | None = None
    """(Also the default of a room unpickled from a snapshot taken before this existed.)"""

    def __init__(
        self,
        table_id: str,
        spec: GameSpec,
        host: str,
        options: v1.TableOptions,
        *,
        created: float,
        listed: bool,
        invite: str | None = None,
        deal: int | None = None,
        daily: str | None = None,
        ranked: bool = False,
    ) -> None:
        self.id = table_id
        self.spec = spec
        self.host = host
        self.options = options
        self.listed = listed
        self.invite = invite if options.private else None
        self.deal = deal
        self.daily = daily
        """The UTC day of the daily deal this session plays: its seed is never shown here."""
        self.ranked = ranked and deal is None and spec.solitaire
        """The games of this session go on the leaderboards (hidden seeds only)."""
        self.assist = Assist() if spec.solitaire else None
        self.seats: list[Seat | None] = [None] * spec.seat_count(options)
        self.spectators: set[str] = set()
        self.status = TableStatus.OPEN
        self.engine: Any = None
        self.seq = 0
        self.kept_events: collections.deque[_KeptEvent] = collections.deque(maxlen=KEPT_EVENTS)
        self.game_start_seq = 1
        """The first event of the current (or last) game, or of the table since it was cleared:
        where ``recent`` history starts."""
        self.turn_deadline: float | None = None
        self.turn_seats: tuple[int, ...] = ()
        self.legal_now: dict[int, list[Any]] = {}
        """Each seat's legal actions as of the last change (only seats that have some)."""
        self.next_round_at: float | None = None
        """While ``between_rounds``: when the next round is dealt."""
        self.waiting_until: float | None = None
        """While ``waiting``: when the game ends unless two seats can play again."""
        self.close_at: float | None = created + options.grace_seconds
        """While deserted: from when the table closes (once no game is running)."""
        self.humans_came = False
        """A human has sat at this table: from then on bots alone do not keep it open."""
        self.host_left = False
        """The host gave up their seat and no human was left to take over: the next human to sit
        becomes the host (a table whose host is gone can still start a game)."""
        self.outcome = Outcome()
        self.timer_budget = TimerBudget()
        self.version = 0
        """Counts the commands that changed the room (kept by
        :func:`blackdrez.server.table.commands.execute`)."""
        self._applied = 0
        self._pending: list[v1.Numbered] = []
        self._info_dirty = False
        self._acted = False
        self.newcomers: set[int] = set()
        """Seats taken while a game runs: their piles start empty at their first round."""
        self.games_begun = 0
        """Games started at this table: the current (or last) one is game number this."""
        self.par_wanted: int | None = None
        """The finished game (its number) whose par the host is to find (see
        :meth:`par_found`), else ``None``."""
        self.game_started_at = 0.0
        self.game_ended_at = 0.0
        self.actions: list[tuple[int, Any]] = []
        """Every ``(seat, action)`` applied to the current (or last) game's engine."""
        self.ratings: dict[str, v1.SeatRating] = {}
        """At a rated table: the seated players' ratings, as the host node last read them from
        the records (:meth:`set_ratings`)."""
        self.game_players: dict[int, tuple[int, str, str, bool]] = {}
        """Who played the current game at each seat, kept when they leave before its end (a
        player who quits is still ranked, and rated)."""

    # ------------------------------------------------------------------ queries
    @property
    def closed(self) -> bool:
        """Whether the room is gone for good."""
        return self.status is TableStatus.CLOSED

    def seat_of(self, player: str) -> int | None:
        """The seat ``player`` holds, or ``None``."""
        for index, seat in enumerate(self.seats):
            if seat is not None and seat.player == player:
                return index
        return None

    def info(self) -> v1.TableInfo:
        """The table as the lobby shows it."""
        return v1.TableInfo(
            id=self.id,
            game=self.spec.name,
            name=self.options.name,
            status=WIRE_STATUS[self.status],
            seats=[
                None
                if s is None
                else v1.SeatInfo(
                    player=s.player,
                    name=s.name,
                    ready=s.ready,
                    connected=s.connected,
                    bot=s.bot,
                    rating=self.ratings.get(s.player) if self.options.rated else None,
                )
                for s in self.seats
            ],
            host=self.host,
            spectators=len(self.spectators),
            private=self.options.private,
            round=self.spec.round_number(self.engine) if self.engine is not None else 0,
            options=self.options,
            commitment=self.engine.commitment if self.engine is not None else None,
            ranked=self.ranked,
            daily=self.daily,
            hints=self.assist.hints if self.assist is not None else 0,
            undos=self.assist.undos if self.assist is not None else 0,
            undoable=len(self.assist.undo) if self.assist is not None else 0,
            held=[
                v1.HeldSeat(seat=index, player=player, name=self.game_players[index][2])
                for index, s in enumerate(self.seats)
                if s is None and (player := self._reserved_for(index)) is not None
            ],
        )

    def view(self, seat: int | None) -> Any:
        """The game as ``seat`` sees it (``None`` without a game); a daily deal's seed is
        left out even after its game: it is revealed only once its day has ended."""
        if self.engine is None:
            return None
        return self._sealed(self.engine.view(seat))

    def _sealed(self, item: Any) -> Any:
        """A view or event without the seed, in a daily deal's session."""
        if self.daily is not None and getattr(item, "seed", None) is not None:
            return msgspec.structs.replace(item, seed=None)
        return item

    def legal(self, seat: int | None) -> list[Any]:
        """The legal actions of ``seat`` now (none for spectators or without a game)."""
        if seat is None or self.engine is None or self.engine.over:
            return []
        return self.engine.legal_actions(seat)

    def snapshot(self, seat: int | None) -> v1.Snapshot:
        """The complete state for one viewer, with the current game's recent events."""
        return v1.Snapshot(
            table=self.id,
            seq=self.seq,
            info=self.info(),
            seat=seat,
            view=self.view(seat),
            legal=self.legal(seat),
            deadline=self.turn_deadline,
            recent=self.recent_events(),
        )

    def recent_events(self) -> list[v1.Numbered]:
        """The last :data:`RECENT_EVENTS` events of the current game (or of the table since it
        was last cleared)."""
        first = max(self.game_start_seq, self.seq - RECENT_EVENTS + 1)
        return self.events_since(first - 1) or []

    def events_since(self, since: int) -> list[v1.Numbered] | None:
        """The events after ``since`` (the same for every viewer), or ``None`` if they are no
        longer kept."""
        if since >= self.seq:
            return []
        if since < 0 or not self.kept_events or self.kept_events[0].seq > since + 1:
            return None
        return [v1.Numbered(seq=e.seq, event=e.event) for e in self.kept_events if e.seq > since]

    def next_deadline(self) -> float | None:
        """The earliest time :meth:`tick` has something to do."""
        times = [
            t for t in (self.turn_deadline, self.next_round_at, self.waiting_until) if t is not None
        ]
        if self.close_at is not None and self.status in (TableStatus.OPEN, TableStatus.FINISHED):
            times.append(self.close_at)
        grace = self.options.grace_seconds
        times += [
            s.away_since + grace for s in self.seats if s is not None and s.away_since is not None
        ]
        return min(times) if times else None

    def should_close(self, now: float) -> bool:
        """Whether the rules say this room should be closed by ``now``: deserted, and no game
        running (a game waiting for players past the end of its wait is over)."""
        if self.close_at is None or now < self.close_at:
            return False
        if self.status in (TableStatus.OPEN, TableStatus.FINISHED):
            return True
        return self.waiting_until is not None and now >= self.waiting_until

    def state_key(self) -> tuple[Any, ...]:
        """Everything a command can change, as one comparable value: equal before and after a
        command means it changed nothing (it need not be logged or broadcast).

        The engine's state changes only by an applied action, counted apart (and every applied
        action also adds events); spectators come and go one per command, so their count will do;
        a table info not yet broadcast is a change to send.
        """
        return (
            self.seq,
            self._applied,
            self.status,
            self.host,
            self.host_left,
            self.humans_came,
            len(self.spectators),
            tuple(
                None
                if s is None
                else (
                    s.player,
                    s.name,
                    s.ready,
                    s.connected,
                    s.bot,
                    s.leaving,
                    s.leaving_reason,
                    s.away_since,
                )
                for s in self.seats
            ),
            self.turn_deadline,
            self.turn_seats,
            self.next_round_at,
            self.waiting_until,
            self.close_at,
            tuple(sorted(self.newcomers)),
            self._info_dirty,
            tuple(sorted(self.ratings.items())),
            self.assist.key() if self.assist is not None else None,
        )

    # ------------------------------------------------------------------ commands
    def join(
        self,
        player: str,
        name: str,
        now: float,
        *,
        seat: int | None = None,
        invite: str | None = None,
        bot: bool = False,
    ) -> int:
        """Seat ``player`` (in ``seat`` or the first free one) and return the seat number."""
        self._check(TableCommand.JOIN)
        existing = self.seat_of(player)
        if existing is not None:
            if seat is not None and seat != existing:
                raise RoomError(ErrorCode.ALREADY_SEATED, f"you already sit in seat {existing}")
            occupant = self.seats[existing]
            assert occupant is not None
            if occupant.leaving:  # left (or timed out) during the round, back before it ended
                if occupant.leaving_reason == "kicked":
                    raise RoomError(
                        ErrorCode.SEAT_TAKEN,
                        f"the host removed you from seat {existing}: it is free after the round",
                    )
                occupant.leaving = False
                if player in self.spectators:  # (watched meanwhile)
                    self.spectators.discard(player)
                    self._info_dirty = True
                self._settle(now)
            return existing
        self._check_invite(player, invite)
        reserved = [self._reserved_for(i) for i in range(len(self.seats))]
        own = reserved.index(player) if player in reserved else None
        if seat is None:
            free = [i for i, s in enumerate(self.seats) if s is None and reserved[i] is None]
            if own is not None:
                free = [own]
            if not free:
                raise RoomError(ErrorCode.TABLE_FULL, "every seat is taken")
            seat = free[0]
        elif not 0 <= seat < len(self.seats):
            raise RoomError(ErrorCode.BAD_MESSAGE, f"seat must be 0 to {len(self.seats) - 1}")
        elif self.seats[seat] is not None:
            raise RoomError(ErrorCode.SEAT_TAKEN, f"seat {seat} is taken")
        elif reserved[seat] not in (None, player):
            raise RoomError(
                ErrorCode.SEAT_TAKEN,
                f"seat {seat} holds the result of a player who left this rated game: "
                "it is theirs until the game ends",
            )
        elif own is not None and seat != own:
            raise RoomError(
                ErrorCode.SEAT_TAKEN,
                f"you played this rated game in seat {own}: only that seat is yours until it ends",
            )
        if self.status is TableStatus.FINISHED:
            self._clear_game()
        self.spectators.discard(player)
        self.seats[seat] = Seat(player=player, name=name, ready=bot, bot=bot)
        self.humans_came = self.humans_came or not bot
        if self.status in GAME_RUNNING and not (
            self._holds_result(seat) and self.game_players[seat][1] == player
        ):  # (a player back in the seat they played keeps its pile)
            self.newcomers.add(seat)
        if not bot and self.host_left:
            self.host = player
            self.host_left = False
        self.outcome.seated.append(player)
        self._event(v1.SeatTaken(seat=seat, player=player, name=name, bot=bot))
        self._settle(now)
        return seat

    def spectate(self, player: str, invite: str | None, now: float) -> None:
        """Let ``player`` watch (a seated player already does)."""
        self._check(TableCommand.SPECTATE)
        seat = self.seat_of(player)
        if seat is not None and not self._leaving(seat):
            return
        if seat is None:  # (one who is leaving their seat had the invite)
            self._check_invite(player, invite)
        if player not in self.spectators:
            self.spectators.add(player)
            self._info_dirty = True
        self._settle(now)

    def leave(self, player: str, now: float) -> None:
        """Give up a seat (after the current round if the player is in it) or stop watching."""
        self._check(TableCommand.LEAVE)
        seat = self.seat_of(player)
        if seat is None or self._leaving(seat):
            if player not in self.spectators:
                if seat is None:
                    raise RoomError(ErrorCode.NOT_SEATED, "you are not at this table")
                return  # leaving already
            self.spectators.discard(player)
            self._info_dirty = True
        else:
            self._abandon(seat, "left")
        self._settle(now)

    def is_host(self, player: str) -> bool:
        """Whether ``player`` may act as the host (not once they left, nor while they leave:
        the next human to sit down becomes host)."""
        if player != self.host or self.host_left:
            return False
        seat = self.seat_of(player)
        return seat is None or not self._leaving(seat)

    def watched_seat(self, player: str) -> int | None:
        """The seat whose copy ``player`` watches: theirs, unless they are leaving it and
        watch as a spectator meanwhile (``None``)."""
        seat = self.seat_of(player)
        if seat is not None and self._leaving(seat) and player in self.spectators:
            return None
        return seat

    def _leaving(self, seat: int) -> bool:
        occupant = self.seats[seat]
        return occupant is not None and occupant.leaving

    def bot_seats(self, player: str, wanted: int, coming: int = 0) -> int:
        """Host only: how many of ``wanted`` bots can sit down now (at least one), when
        ``coming`` bots added before have not sat down yet."""
        self._check(TableCommand.ADD_BOTS)
        if not self.is_host(player):
            raise RoomError(ErrorCode.NOT_HOST, "only the host can add bots")
        open_seats = [i for i, s in enumerate(self.seats) if not s and not self._reserved_for(i)]
        free = len(open_seats) - coming
        if free <= 0:
            raise RoomError(ErrorCode.TABLE_FULL, "every seat is taken (or a bot is on its way)")
        return min(wanted, free)

    # ------------------------------------------------------------------ bots the host manages
    def remove_bot(self, player: str, seat: int, now: float) -> None:
        """Host only: the bot in ``seat`` leaves, as a player who leaves would (after the round
        it is playing). Its client sees its seat freed and disconnects."""
        self._check(TableCommand.REMOVE_BOT)
        if not self.is_host(player):
            raise RoomError(ErrorCode.NOT_HOST, "only the host can remove a bot")
        occupant = self.seats[seat] if 0 <= seat < len(self.seats) else None
        if occupant is None or not occupant.bot:
            raise RoomError(ErrorCode.BAD_MESSAGE, f"seat {seat} holds no bot")
        self._abandon(seat, "kicked")
        self._settle(now)

    def bot_names(self, count: int, strategy: str, skip: int = 0) -> list[str]:
        """``count`` display names for new bots, none used at this table yet: a first name
        from :data:`BOT_NAMES` (after the first ``skip``) and the bot's strategy."""
        taken = {s.name.split(" (")[0] for s in self.seats if s is not None}
        free = [n for n in BOT_NAMES[skip:] + BOT_NAMES[:skip] if n not in taken]
        label = STRATEGY_LABELS.get(strategy, strategy)
        return [f"{free[i % len(free)]} ({label})" for i in range(count)]

    def set_ready(self, player: str, ready: bool, now: float) -> None:
        """Mark a seated player ready (or not) to play (see the module docstring, note d)."""
        self._check(TableCommand.READY)
        seat = self._seat_required(player)
        self._mark_ready(seat, ready)
        self._settle(now)

    def start(self, player: str, now: float, seed: str) -> None:
        """Host only: start a game with the ready players, shuffled from ``seed``. The host, if
        seated, is marked ready: the host who starts plays."""
        self._check(TableCommand.START)
        if not self.is_host(player):
            raise RoomError(ErrorCode.NOT_HOST, "only the host can start the game")
        if self.daily is not None:  # its one game is the day's deal: another would be a re-deal
            raise RoomError(
                ErrorCode.GAME_OVER,
                "a daily deal session plays the day's deal once: start a new session to play",
            )
        own = self.seat_of(player)
        ready = set(self._ready_seats()) | ({own} if own is not None else set())
        if len(ready) < self.spec.min_players:
            raise RoomError(
                ErrorCode.NOT_ENOUGH_PLAYERS,
                f"{self.spec.min_players} ready players are needed, {len(ready)} would play",
            )
        if own is not None:
            self._mark_ready(own, True)
        self._begin(now, seed)

    def begin(self, now: float, seed: str) -> None:
        """Start a new game now (solitaire sessions start at once; tables via :meth:`start`).

        A numbered deal ignores ``seed``: its seed is public, so anyone can replay it."""
        self._check(TableCommand.BEGIN)
        self._begin(now, seed)

    def act(self, player: str, action: dict[str, Any], now: float) -> None:
        """Play ``action`` (its wire form) for the player's own seat."""
        self._check(TableCommand.ACT)
        seat = self._seat_required(player)
        try:
            move = self.spec.action_of(action)
        except msgspec.ValidationError as error:
            raise RoomError(ErrorCode.BAD_ACTION, f"not an action of this game: {error}") from None
        self._apply(seat, move)
        if self.assist is not None:
            for step in forced_finish(self.spec.name, self.engine):
                self._apply(seat, step)
        self._settle(now)

    def hint_job(self, player: str) -> HintJob | None:
        """What the player's hint is computed from (``None``: they have no legal action);
        raises :class:`RoomError` when they may not ask for one. Changes nothing."""
        self._check(TableCommand.HINT)
        seat = self._seat_required(player)
        self._assist()
        return hint_job(self.spec.name, self.engine, seat)

    def hint(
        self, player: str, now: float, given: tuple[Any, str] | None = None
    ) -> tuple[Any, str]:
        """Give the player a hint: ``given`` (the move and the bot that chose it, computed by the
        node's worker from :meth:`hint_job`), else the quick bot's move computed here (see
        ``blackdrez.server.table.assist``). The game is marked as helped. Returns the move and the
        bot."""
        job = self.hint_job(player)
        assist = self._assist()
        if given is None:
            given = (None, "expert") if job is None else quick_hint(job)
        assist.hints += 1
        self._info_dirty = True
        self._settle(now)
        return given

    def undo(self, player: str, now: float) -> None:
        """Take back the player's last move, if it was played since the last card was revealed;
        the game is marked as helped."""
        self._check(TableCommand.UNDO)
        self._seat_required(player)
        assist = self._assist()
        if not assist.undo:
            raise RoomError(
                ErrorCode.NOTHING_TO_UNDO,
                "nothing to undo: a move before the last card was revealed cannot be taken back",
            )
        action = assist.take_back(self.engine)
        self._applied += 1
        self._acted = True
        self._event(v1.Undone(action=action, undoable=len(assist.undo)))
        self._info_dirty = True
        self._settle(now)

    def _assist(self) -> Assist:
        if self.assist is None:
            raise RoomError(ErrorCode.NOT_A_SOLITAIRE, "hints and undo are for solitaires only")
        return self.assist

    def resync(self, player: str, now: float) -> int | None:
        """A viewer asks to catch up: return their seat (``None`` for a spectator); a seated
        player is connected again (one who stayed away past the grace, back before the round
        ended, keeps the seat; one who left it is no longer at the table)."""
        self._check(TableCommand.RESYNC)
        seat = self.seat_of(player)
        if seat is None and player not in self.spectators:
            raise RoomError(ErrorCode.NOT_SEATED, "you are not at this table")
        occupant = self.seats[seat] if seat is not None else None
        if occupant is not None and occupant.leaving:
            if occupant.leaving_reason == "timeout":
                occupant.leaving = False  # back before the seat was freed
            elif player not in self.spectators:
                raise RoomError(ErrorCode.NOT_SEATED, "you left this table")
        self.presence(player, True, now)
        return self.watched_seat(player)

    def presence(self, player: str, connected: bool, now: float) -> None:
        """Note that a seated player's connection dropped or came back (others: nothing)."""
        if not self._check(TableCommand.PRESENCE):
            return
        seat = self.seat_of(player)
        if seat is None:
            return
        occupant = self.seats[seat]
        assert occupant is not None
        if occupant.connected != connected:
            occupant.connected = connected
            occupant.away_since = None if connected else now
            self._event(v1.PresenceChanged(seat=seat, connected=connected))
        self._settle(now)

    def tick(self, now: float) -> None:
        """Do what is due: default actions, the next deal, the end of a wait, freeing abandoned
        seats, closing a deserted table. Nothing due, nothing changes."""
        if not self._check(TableCommand.TICK):
            return
        if self.turn_deadline is not None and now >= self.turn_deadline and self.engine is not None:
            for seat in self.turn_seats:
                action = self.engine.default_action(seat)
                if action is not None:
                    self._event(v1.TimedOut(seat=seat, action=action))
                    self._apply(seat, action)
            self.turn_deadline = None
        if self.next_round_at is not None and now >= self.next_round_at:
            self._deal()
        if self.waiting_until is not None and now >= self.waiting_until:
            self._apply(*self.spec.end_game_action(self.engine))
        grace = self.options.grace_seconds
        for index, occupant in enumerate(self.seats):
            if (
                occupant is not None
                and occupant.away_since is not None
                and now >= occupant.away_since + grace
            ):
                occupant.away_since = None
                self._abandon(index, "timeout")
        self._settle(now)

    def resume(self, now: float) -> None:
        """After the room moved to another node: the player on turn gets a full turn again
        (nobody could act while no node hosted the table), and every player counts as away
        until their client resyncs here."""
        if not self._check(TableCommand.RESUME):
            return
        if self.turn_deadline is not None:
            seconds = self.spec.turn_seconds(self.options)
            self.turn_deadline = None if seconds is None else now + seconds
        if self.next_round_at is not None:
            self.next_round_at = max(self.next_round_at, now)
        for occupant in self.seats:
            if occupant is not None and occupant.connected:
                self.presence(occupant.player, False, now)  # back when they resync here
        self._info_dirty = True
        self._settle(now)

    def par_found(self, game: int, par: dict[str, Any] | None) -> None:
        """The par of game number ``game`` (computed by the host off the event loop, from the
        finished engine): emitted as the ``par`` event if that game still wants it (no other
        game began since, the room is open), else nothing changes."""
        if self.par_wanted != game or self.closed:
            return
        self.par_wanted = None
        if par is not None:
            self._event(msgspec.convert(par, v1.Par))

    def set_ratings(self, ratings: dict[str, v1.SeatRating], now: float) -> None:
        """Note the ratings the host node read for seated players (a rated table shows them
        beside the names; a casual one ignores them). Only seated players' ratings are kept."""
        if not self._check(TableCommand.RATINGS) or not self.options.rated:
            return
        seated = {s.player for s in self.seats if s is not None}
        known = {p: r for p, r in (self.ratings | ratings).items() if p in seated}
        if known != self.ratings:
            self.ratings = known
            self._info_dirty = True
        self._settle(now)

    def close(self, reason: str) -> None:
        """End the room for good."""
        if not self._check(TableCommand.CLOSE):
            return
        self._enter(TableStatus.CLOSED)
        self._event(v1.TableClosed(reason=reason))
        self.outcome.closed = True

    # ------------------------------------------------------------------ output
    def flush(self) -> Broadcast | None:
        """Return the broadcast of everything queued since the last flush, or ``None``."""
        if not self._pending and not self._info_dirty:
            return None
        events, self._pending = self._pending, []
        view = self.view(None) if self.engine is not None else None
        info = self.info() if self._info_dirty else None
        self._info_dirty = False
        return Broadcast(
            table=self.id,
            seq=self.seq,
            events=events,
            view=view,
            legal=dict(self.legal_now),
            deadline=self.turn_deadline,
            info=info,
        )

    def take_outcome(self) -> Outcome:
        """Return and reset the side effects queued since the last call."""
        outcome, self.outcome = self.outcome, Outcome()
        return outcome

    # ------------------------------------------------------------------ the lifecycle
    def _check(self, command: TableCommand) -> bool:
        """Look ``command`` up in :data:`COMMANDS`: ``True`` to go on, ``False`` when it is
        ignored here; raise :class:`RoomError` when it is refused."""
        verdict = COMMANDS[self.status][command]
        if verdict == ALLOWED:
            return True
        if verdict == IGNORED:
            return False
        assert isinstance(verdict, Refusal)
        raise RoomError(verdict.code, verdict.message)

    def _enter(self, status: TableStatus) -> None:
        """Change the status along :data:`TRANSITIONS`, dropping the old status's timer."""
        old = self.status
        if status is old:
            return
        if status not in TRANSITIONS[old]:
            raise AssertionError(f"table {self.id}: no transition from {old} to {status}")
        self.status = status
        self._info_dirty = True
        if old is TableStatus.BETWEEN_ROUNDS:
            self.next_round_at = None
        elif old is TableStatus.WAITING:
            self.waiting_until = None
        if status is TableStatus.FINISHED:
            self._finish()
        elif status is TableStatus.CLOSED:
            self.turn_deadline = self.next_round_at = self.waiting_until = self.close_at = None
            self.turn_seats = ()
            self.legal_now = {}

    def _settle(self, now: float) -> None:
        """After every command: auto-play for leaving players, the status that follows from the
        engine and the seats, its timers, freed seats, and closing a deserted table."""
        if self.closed:
            return
        self._autoplay()
        engine = self.engine
        if engine is not None and self.status in GAME_RUNNING:
            if engine.over:
                self.game_ended_at = now
                self._enter(TableStatus.FINISHED)
            elif not self.spec.between_rounds(engine):
                self._enter(TableStatus.PLAYING)
            elif len(self._round_seats()) >= self.spec.min_players:
                self._enter(TableStatus.BETWEEN_ROUNDS)
            else:
                self._enter(TableStatus.WAITING)
        for index, occupant in enumerate(self.seats):
            if occupant is not None and occupant.leaving and not self._in_round(index):
                self._free(index, occupant.leaving_reason)
        if self.status is TableStatus.BETWEEN_ROUNDS and self.next_round_at is None:
            self.next_round_at = now + self.spec.round_pause(self.options)
        if self.status is TableStatus.WAITING and self.waiting_until is None:
            self.waiting_until = now + self.options.grace_seconds
        self._arm_turn(now)
        if not self._deserted():
            self.close_at = None
        elif self.close_at is None:
            self.close_at = now
        if self.should_close(now):
            self.close("everyone left")

    def _arm_turn(self, now: float) -> None:
        """The legal actions of each seat and the turn timer (only while a round is played)."""
        if self.status is not TableStatus.PLAYING:
            self.turn_deadline = None
            self.turn_seats = ()
            self.legal_now = {}
            self._acted = False
            return
        self.legal_now = {
            i: moves for i, s in enumerate(self.seats) if s is not None and (moves := self.legal(i))
        }
        on_turn = tuple(self.legal_now)
        if self._acted or on_turn != self.turn_seats or self.turn_deadline is None:
            self.turn_seats = on_turn
            seconds = self.spec.turn_seconds(self.options)
            self.turn_deadline = None if seconds is None or not on_turn else now + seconds
        self._acted = False

    def _begin(self, now: float, seed: str) -> None:
        if self.deal is not None:
            seed = self.spec.deal_seed(self.deal)
        self.engine = self.spec.create(self.options, seed)
        self.games_begun += 1
        self.par_wanted = None  # the last game's par is moot now
        self.game_started_at = now
        self.actions = []
        self.game_players = {}
        self._note_players()
        if self.assist is not None:
            self.assist.new_game()
        self.newcomers.clear()
        self._enter(TableStatus.PLAYING)
        self.game_start_seq = self.seq + 1
        self._event(
            v1.GameStarted(game=self.spec.name, commitment=self.engine.commitment, deal=self.deal)
        )
        if self.spec.between_rounds(self.engine):
            self._deal()
        self._settle(now)

    def _deal(self) -> None:
        """Start the next round with the seats that can play it (BlackDrez)."""
        self.next_round_at = None
        seats = self._round_seats()
        step = self.spec.system_action(self.engine, seats, sorted(self.newcomers))
        if step is not None:
            self._apply(*step)
            self.newcomers.difference_update(seats)
            self._info_dirty = True
            for seat in seats:
                if self._holds_result(seat):
                    self._credit(seat)

    def _note_players(self) -> None:
        """Note who holds each seat now as its player in the current game, except where the
        seat's result is a player's who played its rounds (they keep it, whoever sits there
        now), and except a player who has such a result at another seat."""
        for index, s in enumerate(self.seats):
            if s is None or self._holds_result(index):
                continue
            if any(
                player == s.player and self._holds_result(other)
                for other, (_, player, _, _) in self.game_players.items()
            ):
                continue
            self._credit(index)

    def _credit(self, index: int) -> None:
        """Note the player in seat ``index`` as its player in the current game (a player who
        moved seats is kept at the latest one only)."""
        s = self.seats[index]
        assert s is not None
        for other, (_, player, _, _) in list(self.game_players.items()):
            if player == s.player and other != index:
                del self.game_players[other]
        self.game_players[index] = (index, s.player, s.name, s.bot)

    def _holds_result(self, index: int) -> bool:
        """Whether seat ``index`` has a result in the current game (it played a round) that
        belongs to the player noted there."""
        return (
            index in self.game_players
            and self.engine is not None
            and self.spec.has_played(self.engine, index)
        )

    def _reserved_for(self, index: int) -> str | None:
        """At a rated table during a game, the player whose result seat ``index`` holds (they
        played a round there, then left): nobody else may sit there until the game ends, so
        leaving never takes a rated game off a player's rating."""
        if self.options.rated and self.status in GAME_RUNNING and self._holds_result(index):
            return self.game_players[index][1]
        return None

    def _finish(self) -> None:
        self._note_players()
        self.outcome.games_over.append(
            GameOver(
                game_id=f"{self.id}:{self.games_begun}",
                engine=self.engine,
                # A solitaire's undone moves are not part of the game as it stands
                actions=list(self.assist.played) if self.assist is not None else self.actions,
                players=[self.game_players[index] for index in sorted(self.game_players)],
                started_at=self.game_started_at,
                ended_at=self.game_ended_at,
                rated=self.options.rated,
                # a daily deal's seed stays secret until its day ends: so does its record
                sealed_until=day_bounds(self.daily)[1] if self.daily is not None else None,
                scored=(
                    self.ranked
                    and self.assist is not None
                    and not (self.assist.hints or self.assist.undos)
                ),
                private=self.options.private and not self.spec.solitaire,
            )
        )
        self.turn_deadline = None
        self.turn_seats = ()
        self.legal_now = {}
        if self.spec.solitaire:
            self.par_wanted = self.games_begun
        player = self.seats[0]
        if self.ranked and self.assist is not None and player is not None:
            self.outcome.ranked.append(
                ranked_result(
                    f"{self.id}.{self.game_start_seq}",
                    self.engine,
                    self.assist,
                    player.player,
                    player.name,
                    self.daily,
                )
            )
        for seat in self.seats:
            if seat is not None and not seat.bot:
                seat.ready = False

    def _clear_game(self) -> None:
        """Forget a finished game: the table is open for a new one (a newcomer joins)."""
        self.engine = None
        self.newcomers.clear()
        self.game_start_seq = self.seq + 1
        self._enter(TableStatus.OPEN)

    # ------------------------------------------------------------------ internals
    def _event(self, event: Any) -> None:
        self.seq += 1
        self.kept_events.append(_KeptEvent(self.seq, _kept_encoder.encode(event)))
        self._pending.append(v1.Numbered(seq=self.seq, event=event))
        if isinstance(event, _INFO_EVENTS):
            self._info_dirty = True

    def _engine_events(self, events: list[Any]) -> None:
        for event in events:
            self._event(self._sealed(self.engine.event_view(event, None)))

    def _apply(self, seat: int, action: Any) -> None:
        engine = self.engine
        if self.assist is not None:
            before, revealed = engine.dump(), engine.dealt()
        try:
            events = engine.apply(seat, action)
        except Rejected as rejected:
            raise RoomError(REJECTIONS[rejected.reason], rejected.detail) from None
        if self.assist is not None:
            self.assist.applied(seat, action, before, revealed, engine)
            self._info_dirty = True  # the moves that can be taken back changed
        self._applied += 1
        self.actions.append((seat, action))
        self._engine_events(events)
        self._acted = True

    def _abandon(self, seat: int, reason: Literal["left", "timeout", "kicked"]) -> None:
        """A player leaves (or stayed away past the grace period, or the host removed a bot): the
        seat is freed once they are out of the round (a solitaire is resigned at once); see
        :meth:`_settle`."""
        occupant = self.seats[seat]
        assert occupant is not None
        occupant.leaving = True
        occupant.leaving_reason = reason
        if self._in_round(seat):
            quit_now = self.spec.leave_action(self.engine)
            if quit_now is not None:
                self._apply(seat, quit_now)

    def _autoplay(self) -> None:
        """Play the default action for seats whose players are leaving."""
        engine = self.engine
        for _ in range(64):
            if engine is None or engine.over:
                return
            moved = False
            for index, occupant in enumerate(self.seats):
                if occupant is not None and occupant.leaving and engine.legal_actions(index):
                    action = engine.default_action(index)
                    if action is not None:
                        self._apply(index, action)
                        moved = True
            if not moved:
                return

    def _mark_ready(self, seat: int, ready: bool) -> None:
        occupant = self.seats[seat]
        assert occupant is not None
        if occupant.ready != ready:
            occupant.ready = ready
            self._event(v1.ReadyChanged(seat=seat, ready=ready))

    def _free(self, seat: int, reason: str) -> None:
        occupant = self.seats[seat]
        assert occupant is not None
        self.seats[seat] = None
        self.ratings.pop(occupant.player, None)
        self.outcome.unseated.append(occupant.player)
        self._event(v1.SeatFreed(seat=seat, reason=reason))
        if occupant.player == self.host:
            others = [s for s in self.seats if s is not None and not s.bot]
            if others:
                self.host = others[0].player
            else:
                self.host_left = True

    def _deserted(self) -> bool:
        """No human holds a seat (see the module docstring, note 1)."""
        if self.humans_came:
            return all(s is None or s.bot for s in self.seats)
        return all(s is None for s in self.seats)

    def _in_round(self, seat: int) -> bool:
        return (
            self.engine is not None
            and not self.engine.over
            and self.spec.in_round(self.engine, seat)
        )

    def _round_seats(self) -> list[int]:
        return [i for i, s in enumerate(self.seats) if s is not None and not s.leaving and s.ready]

    def _ready_seats(self) -> list[int]:
        return [i for i, s in enumerate(self.seats) if s is not None and s.ready]

    def _seat_required(self, player: str) -> int:
        seat = self.seat_of(player)
        if seat is None:
            raise RoomError(ErrorCode.NOT_SEATED, "you have no seat at this table")
        return seat

    def _check_invite(self, player: str, invite: str | None) -> None:
        if self.invite is not None and player != self.host and invite != self.invite:
            raise RoomError(ErrorCode.INVITE_REQUIRED, "this table is private: an invite is needed")
