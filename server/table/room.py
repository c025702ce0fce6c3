"""One table (or solitaire session) as plain data and synchronous methods: no I/O, no asyncio.

Theory of operation
-------------------
A :class:`Room` is a table's commands and queries over four parts, each owning its state:

* the seats, spectators and host (:class:`~blackdrez.server.table.seating.Seating`), and who
  played each seat of the current game (:class:`~blackdrez.server.table.seating.Roster`);
* the numbered events, kept for resync and gathered for the next broadcast
  (:class:`~blackdrez.server.table.history.EventLog`);
* the deadlines: turn timer, next deal, waiting for players, closing
  (:class:`~blackdrez.server.table.timers.Timers`);
* and, here, the game itself: its engine, the lifecycle status, the actions applied.

Every command method takes the current time ``now`` and either raises :class:`RoomError`
(nothing changed) or changes the room and queues numbered events. The runtime
(:mod:`blackdrez.server.table.commands` and the node) calls :meth:`Room.flush` after each command
to get one :class:`Broadcast` for every viewer, and calls :meth:`Room.tick` when
:meth:`Room.next_deadline` comes. :func:`~blackdrez.server.table.commands.state_key` tells whether
a command changed anything at all: one that changed nothing is neither logged nor broadcast.
Because every method is synchronous, one room's commands never interleave.

The lifecycle (statuses, transitions, which command each status allows) is in
:mod:`blackdrez.server.table.lifecycle`; :func:`_check` looks every command up there first. After
every command :meth:`Room._settle` brings the status, the seats and the deadlines in line with
the engine.

Visibility: every event is passed through the engine's ``event_view`` and the view through
``view``, both for the spectator (``None``): every game shows every card a player may see to
everyone (a test checks it for each game), so one copy serves all viewers and is encoded once;
only the legal actions differ, by seat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.spec import GameSpec
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.table import parts
from blackdrez.server.table.assist import (
    Assist,
    Finished,
    HintJob,
    day_bounds,
    hint_job,
    quick_hint,
    ranked_result,
)
from blackdrez.server.table.chat import TableChat
from blackdrez.server.table.history import RECENT_EVENTS as RECENT_EVENTS
from blackdrez.server.table.history import EventLog
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
from blackdrez.server.table.lifecycle import RoomError as RoomError
from blackdrez.server.table.seating import Leaving, Roster, Seat, Seating
from blackdrez.server.table.timers import RUNAWAY_BURST as RUNAWAY_BURST
from blackdrez.server.table.timers import RUNAWAY_RATE as RUNAWAY_RATE
from blackdrez.server.table.timers import Timers

OPEN, PLAYING, BETWEEN_ROUNDS, WAITING, FINISHED, CLOSED = (
    TableStatus.OPEN,
    TableStatus.PLAYING,
    TableStatus.BETWEEN_ROUNDS,
    TableStatus.WAITING,
    TableStatus.FINISHED,
    TableStatus.CLOSED,
)
"""The statuses, read as module names: on Python 3.11 a member read through its enum's class
(``TableStatus.PLAYING``) goes through ``EnumType.__getattr__``'s hook, a Python call each time,
and the room reads them several times an action (Python 3.12 dropped the hook)."""
ACT, TICK = TableCommand.ACT, TableCommand.TICK
"""The commands the room checks most (every action, every timer), as module names too."""

REJECTIONS: dict[Reason, ErrorCode] = {
    Reason.NOT_YOUR_TURN: ErrorCode.NOT_YOUR_TURN,
    Reason.ILLEGAL: ErrorCode.ILLEGAL_ACTION,
    Reason.GAME_OVER: ErrorCode.GAME_OVER,
    Reason.NOT_IN_ROUND: ErrorCode.NOT_IN_ROUND,
    Reason.BAD_ACTION: ErrorCode.BAD_ACTION,
}
"""The error code of each reason an engine rejects an action for."""

LAYOUT = 4
"""The layout of a room's state (2: in parts, ``Seating``, ``EventLog``, ``Timers``; 3: the kept
events as bare bytes; 4: the chat, ``TableChat``): a snapshot of another layout is not loaded
(``snapshots.load``), the log is replayed instead, by a newer node as by an older one during a
rolling upgrade."""


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


class Outcome:
    """What the runtime must do besides broadcasting: side effects outside the room. Compiled,
    an extension type (``room.pxd``)."""

    def __init__(self) -> None:
        self.ranked: list[Finished] = []
        """Finished games of ranked solitaire sessions, for the leaderboards."""
        self.seated: list[str] = []
        self.unseated: list[str] = []
        self.closed = False
        self.games_over: list[GameOver] = []
        """Games that ended, for the records (``blackdrez.server.records.writer``)."""

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        parts.restore(self, pickled)

    def pending(self) -> bool:
        """Whether there is anything to do."""
        return bool(self.ranked or self.seated or self.unseated or self.closed or self.games_over)


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
    arena: str | None = None
    """The arena the table was made for: its record says so, and its places score there."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (to the records process, and in a snapshot) with its actions as one
        MessagePack of their wire forms, which is all a record needs of them
        (``games.verify.record_of``): pickle took longer over the actions' Structs, one by one,
        than over the rest of the game together."""
        return (
            _game_over,
            (
                self.game_id,
                self.engine,
                _ACTIONS_ENCODER.encode(self.actions),
                self.players,
                self.started_at,
                self.ended_at,
                self.rated,
                self.sealed_until,
                self.scored,
                self.private,
                self.arena,
            ),
        )


_ACTIONS_ENCODER = msgspec.msgpack.Encoder()


def _game_over(game_id: str, engine: Any, actions: bytes, *rest: Any) -> GameOver:
    """A :class:`GameOver` from its pickle: its actions in their wire form (dictionaries)."""
    pairs = [(seat, action) for seat, action in msgspec.msgpack.decode(actions)]
    return GameOver(game_id, engine, pairs, *rest)


def _check(status: TableStatus, command: TableCommand) -> bool:
    """Look ``command`` up in :data:`COMMANDS`: ``True`` to go on, ``False`` when it is ignored
    in ``status``; raise :class:`RoomError` when it is refused."""
    verdict = COMMANDS[status][command]
    if verdict == ALLOWED:
        return True
    if verdict == IGNORED:
        return False
    assert isinstance(verdict, Refusal)
    raise RoomError(verdict.code, verdict.message)


def _in_round(spec: GameSpec, engine: Any, seat: int) -> bool:
    """Whether ``seat`` takes part in the round being played."""
    return engine is not None and not engine.over and spec.in_round(engine, seat)


def _solitaire(assist: Assist | None) -> Assist:
    """A solitaire session's help; :class:`RoomError` at a table."""
    if assist is None:
        raise RoomError(ErrorCode.NOT_A_SOLITAIRE, "hints and undo are for solitaires only")
    return assist


_PICKLED_DEFAULTS = {"layout": 1, "arena": None}
"""What a room unpickled from an older snapshot has where it lacks an attribute: the layout of the
snapshots before :data:`LAYOUT` was kept, no arena."""


class Room:
    """A table or solitaire session (see the module docstring). Compiled (``blackdrez compile
    --core``), an extension type whose attributes ``room.pxd`` declares: an attribute added
    here is added there too (:mod:`blackdrez.server.table.parts`)."""

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
        spectator_chat: bool = True,
        arena: str | None = None,
    ) -> None:
        self.layout = LAYOUT
        """The state's layout (see :data:`LAYOUT`): a room unpickled from an older snapshot has
        the default of :data:`_PICKLED_DEFAULTS`."""
        self.arena = arena
        """The arena this table was made for (its games score there)."""
        self.id = table_id
        self.spec = spec
        self.options = options
        self.listed = listed
        self.deal = deal
        self.daily = daily
        """The UTC day of the daily deal this session plays: its seed is never shown here."""
        self.ranked = ranked and deal is None and spec.solitaire
        """The games of this session go on the leaderboards (hidden seeds only)."""
        self.assist = Assist() if spec.solitaire else None
        self.log = EventLog()
        self.seating = Seating(
            spec.seat_count(options), host, invite if options.private else None, self.log
        )
        self.seats = self.seating.seats
        """The seats (the seating's own list, which the node reads as the room's)."""
        self.spectators = self.seating.spectators
        """The spectators (the seating's own set)."""
        self.invite = self.seating.invite
        self.roster = Roster(spec)
        self.chat = TableChat(self.log, spectator_chat)
        self.timers = Timers(spec.turn_seconds(options), created + options.grace_seconds)
        self.status = OPEN
        self.engine: Any = None
        self.outcome = Outcome()
        self.version = 0
        """Counts the commands that changed the room (kept by
        :func:`blackdrez.server.table.commands.execute`)."""
        self.applied = 0
        """Actions applied (and taken back) here: the engine's state changes by these only."""
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

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        parts.restore(self, pickled, _PICKLED_DEFAULTS)

    # ------------------------------------------------------------------ queries
    @property
    def closed(self) -> bool:
        """Whether the room is gone for good."""
        return self.status is CLOSED

    @property
    def seq(self) -> int:
        """The number of the last event."""
        return self.log.seq

    def seat_of(self, player: str) -> int | None:
        """The seat ``player`` holds, or ``None``."""
        return self.seating.seat_of(player)

    def info(self) -> v1.TableInfo:
        """The table as the lobby shows it."""
        seating, assist, rated = self.seating, self.assist, self.options.rated
        reserving = rated and self.status in GAME_RUNNING
        return v1.TableInfo(
            id=self.id,
            game=self.spec.name,
            name=self.options.name,
            status=WIRE_STATUS[self.status],
            seats=seating.infos(rated),
            host=seating.host,
            spectators=len(self.spectators),
            private=self.options.private,
            round=self.spec.round_number(self.engine) if self.engine is not None else 0,
            options=self.options,
            commitment=self.engine.commitment if self.engine is not None else None,
            ranked=self.ranked,
            daily=self.daily,
            hints=assist.hints if assist is not None else 0,
            undos=assist.undos if assist is not None else 0,
            undoable=len(assist.undo) if assist is not None else 0,
            held=[
                v1.HeldSeat(seat=index, player=player, name=self.roster.players[index][2])
                for index, s in enumerate(self.seats)
                if s is None
                and reserving
                and (player := self.roster.reserved_for(index, self.engine)) is not None
            ],
            spectator_chat=self.chat.spectators_write,
            arena=self.arena,
        )

    def view(self, seat: int | None) -> Any:
        """The game as ``seat`` sees it (``None`` without a game); a daily deal's seed is
        left out even after its game: it is revealed only once its day has ended."""
        if self.engine is None:
            return None
        view = self.engine.view(seat)
        if self.daily is not None and getattr(view, "seed", None) is not None:
            return msgspec.structs.replace(view, seed=None)
        return view

    def legal(self, seat: int | None) -> list[Any]:
        """The legal actions of ``seat`` now (none for spectators or without a game)."""
        if seat is None or self.engine is None or self.engine.over:
            return []
        return self.engine.legal_actions(seat)

    def snapshot(self, seat: int | None) -> v1.Snapshot:
        """The complete state for one viewer, with the current game's recent events."""
        return v1.Snapshot(
            table=self.id,
            seq=self.log.seq,
            info=self.info(),
            seat=seat,
            view=self.view(seat),
            legal=self.legal(seat),
            deadline=self.timers.turn_deadline,
            recent=self.log.recent(),
            chat=list(self.chat.lines),
        )

    def should_close(self, now: float) -> bool:
        """Whether the rules say this room should be closed by ``now``: deserted, and no game
        running (a game waiting for players past the end of its wait is over)."""
        return self.timers.should_close(now, self.status)

    def next_deadline(self) -> float | None:
        """The earliest time :meth:`tick` has something to do."""
        return self.timers.next(self.status, self.seats, self.options.grace_seconds)

    # ------------------------------------------------------------------ seats and presence
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
        _check(self.status, TableCommand.JOIN)
        seating, seats = self.seating, self.seats
        existing = seating.seat_of(player)
        if existing is not None:
            if seat is not None and seat != existing:
                raise RoomError(ErrorCode.ALREADY_SEATED, f"you already sit in seat {existing}")
            occupant = seats[existing]
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
                    self.log.info_dirty = True
                self._settle(now)
            if not occupant.connected:  # a seat taken for them (a matched table): here now
                self.presence(player, True, now)
            return existing
        seating.check_invite(player, invite)
        reserving = self.options.rated and self.status in GAME_RUNNING
        reserved = [
            self.roster.reserved_for(i, self.engine) if reserving else None
            for i in range(len(seats))
        ]
        own = reserved.index(player) if player in reserved else None
        if seat is None:
            free = [i for i, s in enumerate(seats) if s is None and reserved[i] is None]
            if own is not None:
                free = [own]
            if not free:
                raise RoomError(ErrorCode.TABLE_FULL, "every seat is taken")
            seat = free[0]
        elif not 0 <= seat < len(seats):
            raise RoomError(ErrorCode.BAD_MESSAGE, f"seat must be 0 to {len(seats) - 1}")
        elif seats[seat] is not None:
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
        if self.status is FINISHED:  # a newcomer clears the finished game
            self.engine = None
            self.newcomers.clear()
            self.log.game_start = self.log.seq + 1
            self._enter(OPEN)
        self.spectators.discard(player)
        seats[seat] = Seat(player=player, name=name, ready=bot, bot=bot)
        seating.humans_came = seating.humans_came or not bot
        if self.status in GAME_RUNNING and not (
            self.roster.holds_result(seat, self.engine) and self.roster.players[seat][1] == player
        ):  # (a player back in the seat they played keeps its pile)
            self.newcomers.add(seat)
        if not bot and seating.host_left:
            seating.host = player
            seating.host_left = False
        self.outcome.seated.append(player)
        self.log.emit(v1.SeatTaken(seat=seat, player=player, name=name, bot=bot))
        self._settle(now)
        return seat

    def spectate(self, player: str, invite: str | None, now: float) -> None:
        """Let ``player`` watch (a seated player already does)."""
        _check(self.status, TableCommand.SPECTATE)
        seat = self.seating.seat_of(player)
        if seat is not None and not self.seating.leaving(seat):
            return
        if seat is None:  # (one who is leaving their seat had the invite)
            self.seating.check_invite(player, invite)
            self.chat.check_watcher(player)
        if player not in self.spectators:
            self.spectators.add(player)
            self.log.info_dirty = True
        self._settle(now)

    def leave(self, player: str, now: float) -> None:
        """Give up a seat (after the current round if the player is in it) or stop watching."""
        _check(self.status, TableCommand.LEAVE)
        seat = self.seating.seat_of(player)
        if seat is None or self.seating.leaving(seat):
            if player not in self.spectators:
                if seat is None:
                    raise RoomError(ErrorCode.NOT_SEATED, "you are not at this table")
                return  # leaving already
            self.spectators.discard(player)
            self.log.info_dirty = True
        else:
            self._abandon(seat, "left")
        self._settle(now)

    def chat_command(
        self, player: str, name: str, command: v1.Say | v1.RemoveSpectator, now: float, bot: bool
    ) -> None:
        """A chat command: ``say`` (a line by a seated player, or by a spectator where the
        options allow) or ``remove_spectator`` (the host sends a spectator away)."""
        if isinstance(command, v1.Say):
            _check(self.status, TableCommand.SAY)
            self.chat.say(self.seating, player, name, command, bot=bot)
        else:
            _check(self.status, TableCommand.REMOVE_SPECTATOR)
            self.chat.remove(self.seating, player, command.player)
        self._settle(now)

    def set_ready(self, player: str, ready: bool, now: float) -> None:
        """Mark a seated player ready (or not) to play (see ``lifecycle``, note d)."""
        _check(self.status, TableCommand.READY)
        self.seating.mark_ready(self.seating.required(player), ready)
        self._settle(now)

    def resync(self, player: str, now: float) -> int | None:
        """A viewer asks to catch up: return their seat (``None`` for a spectator); a seated
        player is connected again (one who stayed away past the grace, back before the round
        ended, keeps the seat; one who left it is no longer at the table)."""
        _check(self.status, TableCommand.RESYNC)
        seat = self.seating.seat_of(player)
        if seat is None and player not in self.spectators:
            raise RoomError(ErrorCode.NOT_SEATED, "you are not at this table")
        occupant = self.seats[seat] if seat is not None else None
        if occupant is not None and occupant.leaving:
            if occupant.leaving_reason == "timeout":
                occupant.leaving = False  # back before the seat was freed
            elif player not in self.spectators:
                raise RoomError(ErrorCode.NOT_SEATED, "you left this table")
        self.presence(player, True, now)
        return self.seating.watched_seat(player)

    def presence(self, player: str, connected: bool, now: float) -> None:
        """Note that a seated player's connection dropped or came back (others: nothing)."""
        if not _check(self.status, TableCommand.PRESENCE):
            return
        seat = self.seating.seat_of(player)
        if seat is None:
            return
        self.seating.connect(seat, connected, now)
        self._settle(now)

    def set_ratings(self, ratings: dict[str, v1.SeatRating], now: float) -> None:
        """Note the ratings the host node read for seated players (a rated table shows them
        beside the names; a casual one ignores them). Only seated players' ratings are kept."""
        if not _check(self.status, TableCommand.RATINGS) or not self.options.rated:
            return
        seating = self.seating
        seated = {s.player for s in self.seats if s is not None}
        known = {p: r for p, r in (seating.ratings | ratings).items() if p in seated}
        if known != seating.ratings:
            seating.ratings = known
            self.log.info_dirty = True
        self._settle(now)

    # ------------------------------------------------------------------ bots the host manages
    def bot_seats(self, player: str, wanted: int, coming: int = 0) -> int:
        """Host only: how many of ``wanted`` bots can sit down now (at least one), when
        ``coming`` bots added before have not sat down yet."""
        _check(self.status, TableCommand.ADD_BOTS)
        if not self.seating.is_host(player):
            raise RoomError(ErrorCode.NOT_HOST, "only the host can add bots")
        reserving = self.options.rated and self.status in GAME_RUNNING
        open_seats = [
            i
            for i, s in enumerate(self.seats)
            if not s and not (reserving and self.roster.reserved_for(i, self.engine))
        ]
        free = len(open_seats) - coming
        if free <= 0:
            raise RoomError(ErrorCode.TABLE_FULL, "every seat is taken (or a bot is on its way)")
        return min(wanted, free)

    def remove_bot(self, player: str, seat: int, now: float) -> None:
        """Host only: the bot in ``seat`` leaves, as a player who leaves would (after the round
        it is playing). Its client sees its seat freed and disconnects."""
        _check(self.status, TableCommand.REMOVE_BOT)
        if not self.seating.is_host(player):
            raise RoomError(ErrorCode.NOT_HOST, "only the host can remove a bot")
        occupant = self.seats[seat] if 0 <= seat < len(self.seats) else None
        if occupant is None or not occupant.bot:
            raise RoomError(ErrorCode.BAD_MESSAGE, f"seat {seat} holds no bot")
        self._abandon(seat, "kicked")
        self._settle(now)

    def bot_names(self, count: int, strategy: str, skip: int = 0) -> list[str]:
        """``count`` display names for new bots, none used at this table yet: a first name
        from the game's ``bot_names`` (after the first ``skip``, cycled) and the strategy."""
        spec = self.spec
        return self.seating.bot_names(count, strategy, skip, spec.bot_names, spec.strategy_labels)

    # ------------------------------------------------------------------ the game
    def start(self, player: str, now: float, seed: str) -> None:
        """Host only: start a game with the ready players, shuffled from ``seed``. The host, if
        seated, is marked ready: the host who starts plays."""
        _check(self.status, TableCommand.START)
        if not self.seating.is_host(player):
            raise RoomError(ErrorCode.NOT_HOST, "only the host can start the game")
        if self.daily is not None:  # its one game is the day's deal: another would be a re-deal
            raise RoomError(
                ErrorCode.GAME_OVER,
                "a daily deal session plays the day's deal once: start a new session to play",
            )
        own = self.seating.seat_of(player)
        ready = set(self.seating.ready_seats()) | ({own} if own is not None else set())
        if len(ready) < self.spec.min_players:
            raise RoomError(
                ErrorCode.NOT_ENOUGH_PLAYERS,
                f"{self.spec.min_players} ready players are needed, {len(ready)} would play",
            )
        if own is not None:
            self.seating.mark_ready(own, True)
        self.begin(now, seed)

    def begin(self, now: float, seed: str) -> None:
        """Start a new game now (solitaire sessions start at once; tables via :meth:`start`).

        A numbered deal ignores ``seed``: its seed is public, so anyone can replay it."""
        _check(self.status, TableCommand.BEGIN)
        if self.deal is not None:
            seed = self.spec.deal_seed(self.deal)
        self.engine = self.spec.create(self.options, seed)
        self.games_begun += 1
        self.par_wanted = None  # the last game's par is moot now
        self.game_started_at = now
        self.actions = []
        self.roster.players = {}
        self.roster.note(self.seats, self.engine)
        if self.assist is not None:
            self.assist.new_game()
        self.newcomers.clear()
        self._enter(PLAYING)
        self.log.game_start = self.log.seq + 1
        self.log.emit(
            v1.GameStarted(game=self.spec.name, commitment=self.engine.commitment, deal=self.deal)
        )
        if self.spec.between_rounds(self.engine):
            self._deal()
        self._settle(now)

    def act(self, player: str, action: dict[str, Any], now: float) -> None:
        """Play ``action`` (its wire form) for the player's own seat."""
        _check(self.status, ACT)
        seat = self.seating.required(player)
        try:
            move = self.spec.action_of(action)
        except msgspec.ValidationError as error:
            raise RoomError(ErrorCode.BAD_ACTION, f"not an action of this game: {error}") from None
        self._apply(seat, move)
        self.timers.budget.acted()
        if self.assist is not None:
            for step in self.spec.forced_finish(self.engine):
                self._apply(seat, step)
        self._settle(now)

    def hint_job(self, player: str) -> HintJob | None:
        """What the player's hint is computed from (``None``: they have no legal action);
        raises :class:`RoomError` when they may not ask for one. Changes nothing."""
        _check(self.status, TableCommand.HINT)
        seat = self.seating.required(player)
        _solitaire(self.assist)
        return hint_job(self.spec.name, self.engine, seat)

    def hint(
        self, player: str, now: float, given: tuple[Any, str] | None = None
    ) -> tuple[Any, str]:
        """Give the player a hint: ``given`` (the move and the bot that chose it, computed by the
        node's worker from :meth:`hint_job`), else the quick bot's move computed here (see
        ``blackdrez.server.table.assist``). The game is marked as helped. Returns the move and
        the bot."""
        job = self.hint_job(player)
        assist = _solitaire(self.assist)
        if given is None:
            given = (None, "expert") if job is None else quick_hint(job)
        assist.hints += 1
        self.log.info_dirty = True
        self._settle(now)
        return given

    def undo(self, player: str, now: float) -> None:
        """Take back the player's last move, if it was played since the last card was revealed;
        the game is marked as helped."""
        _check(self.status, TableCommand.UNDO)
        self.seating.required(player)
        assist = _solitaire(self.assist)
        if not assist.undo:
            raise RoomError(
                ErrorCode.NOTHING_TO_UNDO,
                "nothing to undo: a move before the last card was revealed cannot be taken back",
            )
        action = assist.take_back(self.engine)
        self.applied += 1
        self._acted = True
        self.log.emit(v1.Undone(action=action, undoable=len(assist.undo)))
        self.log.info_dirty = True
        self._settle(now)

    def par_found(self, game: int, par: dict[str, Any] | None) -> None:
        """The par of game number ``game`` (computed by the host off the event loop, from the
        finished engine): emitted as the ``par`` event if that game still wants it (no other
        game began since, the room is open), else nothing changes."""
        if self.par_wanted != game or self.closed:
            return
        self.par_wanted = None
        if par is not None:
            self.log.emit(msgspec.convert(par, v1.Par))

    # ------------------------------------------------------------------ time
    def tick(self, now: float) -> None:
        """Do what is due: default actions, the next deal, the end of a wait, freeing abandoned
        seats, closing a deserted table. Nothing due, nothing changes."""
        if not _check(self.status, TICK):
            return
        timers = self.timers
        if timers.turn_deadline is not None and now >= timers.turn_deadline and self.engine:
            for seat in timers.turn_seats:
                action = self.engine.default_action(seat)
                if action is not None:
                    self.log.emit(v1.TimedOut(seat=seat, action=action))
                    self._apply(seat, action)
            timers.turn_deadline = None
        if timers.next_round_at is not None and now >= timers.next_round_at:
            self._deal()
        if timers.waiting_until is not None and now >= timers.waiting_until:
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
        if not _check(self.status, TableCommand.RESUME):
            return
        timers = self.timers
        if timers.turn_deadline is not None:
            seconds = timers.turn_seconds
            timers.turn_deadline = None if seconds is None else now + seconds
        if timers.next_round_at is not None:
            timers.next_round_at = max(timers.next_round_at, now)
        for occupant in self.seats:
            if occupant is not None and occupant.connected:
                self.presence(occupant.player, False, now)  # back when they resync here
        self.log.info_dirty = True
        self._settle(now)

    def close(self, reason: str) -> None:
        """End the room for good."""
        if not _check(self.status, TableCommand.CLOSE):
            return
        self._enter(CLOSED)
        self.log.emit(v1.TableClosed(reason=reason))
        self.outcome.closed = True

    # ------------------------------------------------------------------ output
    def flush(self) -> Broadcast | None:
        """Return the broadcast of everything queued since the last flush, or ``None``."""
        log = self.log
        if not log.pending and not log.info_dirty:
            return None
        events, log.pending = log.pending, []
        view = self.view(None) if self.engine is not None else None
        info = self.info() if log.info_dirty else None
        log.info_dirty = False
        return Broadcast(
            table=self.id,
            seq=log.seq,
            events=events,
            view=view,
            legal=dict(self.timers.legal_now),
            deadline=self.timers.turn_deadline,
            info=info,
        )

    def take_outcome(self) -> Outcome:
        """Return and reset the side effects queued since the last call."""
        outcome, self.outcome = self.outcome, Outcome()
        return outcome

    # ------------------------------------------------------------------ the lifecycle
    def _enter(self, status: TableStatus) -> None:
        """Change the status along :data:`TRANSITIONS`, dropping the old status's timer."""
        old = self.status
        if status is old:
            return
        if status not in TRANSITIONS[old]:
            raise AssertionError(f"table {self.id}: no transition from {old} to {status}")
        self.status = status
        self.log.info_dirty = True
        if old is BETWEEN_ROUNDS:
            self.timers.next_round_at = None
        elif old is WAITING:
            self.timers.waiting_until = None
        if status is FINISHED:
            self._finish()
        elif status is CLOSED:
            self.timers.stop()

    def _settle(self, now: float) -> None:
        """After every command: the default action for seats whose players are leaving, the
        status that follows from the engine and the seats, its timers, freed seats, and closing
        a deserted table."""
        if self.closed:
            return
        engine, seats, timers, seating = self.engine, self.seats, self.timers, self.seating
        leaving = seating.leaving_seats()  # (nearly always none; nothing here makes more)
        for _ in range(64 if leaving else 0):  # they play their default action while they can
            if engine is None or engine.over:
                break
            moved = False
            for index in leaving:
                if engine.legal_actions(index):
                    action = engine.default_action(index)
                    if action is not None:
                        self._apply(index, action)
                        moved = True
            if not moved:
                break
        if engine is not None and self.status in GAME_RUNNING:
            if engine.over:
                self.game_ended_at = now
                self._enter(FINISHED)
            elif not self.spec.between_rounds(engine):
                self._enter(PLAYING)
            elif len(seating.round_seats()) >= self.spec.min_players:
                self._enter(BETWEEN_ROUNDS)
            else:
                self._enter(WAITING)
        for index in leaving:
            occupant = seats[index]
            if occupant is not None and not _in_round(self.spec, engine, index):
                self.outcome.unseated.append(seating.free(index, occupant.leaving_reason))
        if self.status is BETWEEN_ROUNDS and timers.next_round_at is None:
            timers.next_round_at = now + self.spec.round_pause(self.options)
        if self.status is WAITING and timers.waiting_until is None:
            timers.waiting_until = now + self.options.grace_seconds
        if self.status is PLAYING:
            legal_now: dict[int, list[Any]] = {}
            if engine is not None and not engine.over:  # (``legal`` of each seat, inline)
                legal = engine.legal_actions
                legal_now = {
                    i: moves for i, s in enumerate(seats) if s is not None and (moves := legal(i))
                }
            timers.arm_turn(now, legal_now, self._acted)
        else:
            timers.stop_turn()
        self._acted = False
        if not seating.deserted():
            timers.close_at = None
        elif timers.close_at is None:
            timers.close_at = now
        if timers.should_close(now, self.status):
            self.close("everyone left")

    def _deal(self) -> None:
        """Start the next round with the seats that can play it (BlackDrez)."""
        self.timers.next_round_at = None
        seats = self.seating.round_seats()
        step = self.spec.system_action(self.engine, seats, sorted(self.newcomers))
        if step is not None:
            self._apply(*step)
            self.newcomers.difference_update(seats)
            self.log.info_dirty = True
            for seat in seats:
                if self.roster.holds_result(seat, self.engine):
                    occupant = self.seats[seat]
                    assert occupant is not None
                    self.roster.credit(seat, occupant)

    def _finish(self) -> None:
        roster, assist = self.roster, self.assist
        roster.note(self.seats, self.engine)
        self.outcome.games_over.append(
            GameOver(
                game_id=f"{self.id}:{self.games_begun}",
                engine=self.engine,
                # A solitaire's undone moves are not part of the game as it stands
                actions=list(assist.played) if assist is not None else self.actions,
                players=[roster.players[index] for index in sorted(roster.players)],
                started_at=self.game_started_at,
                ended_at=self.game_ended_at,
                rated=self.options.rated,
                # a daily deal's seed stays secret until its day ends: so does its record
                sealed_until=day_bounds(self.daily)[1] if self.daily is not None else None,
                scored=self.ranked and assist is not None and not (assist.hints or assist.undos),
                private=self.options.private and not self.spec.solitaire,
                arena=self.arena,
            )
        )
        self.timers.stop_turn()
        if self.spec.solitaire:
            self.par_wanted = self.games_begun
        player = self.seats[0]
        if self.ranked and assist is not None and player is not None:
            self.outcome.ranked.append(
                ranked_result(
                    f"{self.id}.{self.log.game_start}",
                    self.engine,
                    assist,
                    player.player,
                    player.name,
                    self.daily,
                )
            )
        for seat in self.seats:
            if seat is not None and not seat.bot:
                seat.ready = False

    # ------------------------------------------------------------------ the action path
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
            self.log.info_dirty = True  # the moves that can be taken back changed
        self.applied += 1
        self.actions.append((seat, action))
        emit, daily = self.log.emit, self.daily
        for event in events:
            seen = engine.event_view(event, None)
            if daily is not None and getattr(seen, "seed", None) is not None:
                seen = msgspec.structs.replace(seen, seed=None)
            emit(seen)
        self._acted = True

    def _abandon(self, seat: int, reason: Leaving) -> None:
        """A player leaves (or stayed away past the grace period, or the host removed a bot): the
        seat is freed once they are out of the round (a solitaire is resigned at once); see
        :meth:`_settle`."""
        occupant = self.seats[seat]
        assert occupant is not None
        occupant.leaving = True
        occupant.leaving_reason = reason
        if _in_round(self.spec, self.engine, seat):
            quit_now = self.spec.leave_action(self.engine)
            if quit_now is not None:
                self._apply(seat, quit_now)
