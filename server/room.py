"""One table (or solitaire session) as plain data and synchronous methods: no I/O, no asyncio.

Theory of operation
-------------------
A :class:`Room` holds the seats, the engine of the running game, the numbered event log, and the
deadlines (turn timer, next round, disconnect grace). Every method takes the current time ``now``
and either raises :class:`RoomError` (nothing changed) or changes the room and queues numbered
events. The runtime (``server.tables``) calls :meth:`Room.flush` after each command to get one
:class:`Broadcast` for every viewer, and calls :meth:`Room.tick` when :meth:`Room.next_deadline`
comes. Because every method is synchronous, one room's commands never interleave.

Lifecycle (``status``) and what each command may do there::

    status     join/spectate  leave            ready  start        act
    open       yes            frees the seat   yes    host, >=2    -
    playing    free seats(1)  after the round  yes    -            players in the round
    finished   yes            frees the seat   yes    host, >=2    -
    closed     -              -                -      -            -

(1) a newcomer plays from the next round on.

Visibility: every event is passed through the engine's ``event_view`` and every view through
``view`` for each viewer class: the spectator (``None``) and each seat. Only where a seat's copy
differs from the spectator's is it kept apart, so the common case is encoded once for everyone.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

import msgspec

from protocol import v1
from protocol.errors import ErrorCode
from server.adapters import GameAdapter
from server.games.base import Rejected
from server.identity import BOT_NAMES, BOT_STRATEGY_LABELS

_INFO_EVENTS = (v1.SeatTaken, v1.SeatFreed, v1.ReadyChanged, v1.PresenceChanged, v1.TableClosed)

LOG_SIZE = 256
"""Events kept for ``resync``; a client further behind gets a snapshot."""


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
    """Asked to leave during a round: plays the default action at each turn, freed at round end."""
    away_since: float | None = None


class Broadcast(msgspec.Struct, kw_only=True):
    """Everything a table's viewers need after one command, for every viewer class at once.

    ``seat_*`` maps hold only the seats whose copy differs from the spectator's.
    """

    table: str
    seq: int
    events: list[v1.Numbered]
    seat_events: dict[int, list[v1.Numbered]] = {}
    view: Any = None
    seat_views: dict[int, Any] = {}
    legal: dict[int, list[Any]] = {}
    deadline: float | None = None
    info: v1.TableInfo | None = None

    def for_seat(self, seat: int | None) -> v1.Update:
        """The ``update`` message for one viewer."""
        return v1.Update(
            table=self.table,
            seq=self.seq,
            events=self.seat_events.get(seat, self.events) if seat is not None else self.events,
            view=self.seat_views.get(seat, self.view) if seat is not None else self.view,
            legal=self.legal.get(seat, []) if seat is not None else [],
            deadline=self.deadline,
            info=self.info,
        )

    def variant(self, seat: int | None) -> int | None:
        """The viewer class of ``seat``: the seat itself if its copy differs, else ``None``."""
        if seat is not None and (
            seat in self.seat_events or seat in self.seat_views or seat in self.legal
        ):
            return seat
        return None


@dataclass
class _Entry:
    seq: int
    event: Any
    seat_events: dict[int, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    """What the runtime must do besides broadcasting: side effects outside the room."""

    scores: list[tuple[str, str, int]] = field(default_factory=list)
    """Finished solitaire games: ``(player, name, score)`` for the leaderboard."""
    seated: list[str] = field(default_factory=list)
    unseated: list[str] = field(default_factory=list)
    closed: bool = False


class Room:
    """A table or solitaire session (see the module docstring)."""

    def __init__(
        self,
        table_id: str,
        adapter: GameAdapter,
        host: str,
        options: v1.TableOptions,
        *,
        listed: bool,
        invite: str | None = None,
        deal: int | None = None,
    ) -> None:
        self.id = table_id
        self.adapter = adapter
        self.host = host
        self.options = options
        self.listed = listed
        self.invite = invite if options.private else None
        self.deal = deal
        self.seats: list[Seat | None] = [None] * adapter.seat_count(options)
        self.spectators: set[str] = set()
        self.status: str = "open"
        self.engine: Any = None
        self.seq = 0
        self.log: collections.deque[_Entry] = collections.deque(maxlen=LOG_SIZE)
        self.turn_deadline: float | None = None
        self.turn_seats: tuple[int, ...] = ()
        self.legal_now: dict[int, list[Any]] = {}
        """Each seat's legal actions as of the last change (only seats that have some)."""
        self.next_round_at: float | None = None
        self.outcome = Outcome()
        self._pending: list[_Entry] = []
        self._info_dirty = True
        self._acted = False
        self.newcomers: set[int] = set()
        """Seats taken while a game runs: their piles start empty at their first round."""

    # ------------------------------------------------------------------ queries
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
            game=self.adapter.name,
            name=self.options.name,
            status=self.status,
            seats=[
                None
                if s is None
                else v1.SeatInfo(
                    player=s.player, name=s.name, ready=s.ready, connected=s.connected, bot=s.bot
                )
                for s in self.seats
            ],
            host=self.host,
            spectators=len(self.spectators),
            private=self.options.private,
            round=self.adapter.round_number(self.engine) if self.engine is not None else 0,
            options=self.options,
            commitment=self.engine.commitment if self.engine is not None else None,
        )

    def legal(self, seat: int | None) -> list[Any]:
        """The legal actions of ``seat`` now (none for spectators or without a game)."""
        if seat is None or self.engine is None or self.engine.over:
            return []
        return self.engine.legal_actions(seat)

    def snapshot(self, seat: int | None) -> v1.Snapshot:
        """The complete state for one viewer."""
        return v1.Snapshot(
            table=self.id,
            seq=self.seq,
            info=self.info(),
            seat=seat,
            view=self.engine.view(seat) if self.engine is not None else None,
            legal=self.legal(seat),
            deadline=self.turn_deadline,
        )

    def events_since(self, since: int, seat: int | None) -> list[v1.Numbered] | None:
        """The events after ``since`` for one viewer, or ``None`` if the log no longer has them."""
        if since >= self.seq:
            return []
        if since < 0 or not self.log or self.log[0].seq > since + 1:
            return None
        return [
            v1.Numbered(
                seq=e.seq, event=e.seat_events.get(seat, e.event) if seat is not None else e.event
            )
            for e in self.log
            if e.seq > since
        ]

    def next_deadline(self) -> float | None:
        """The earliest time :meth:`tick` has something to do."""
        times = [t for t in (self.turn_deadline, self.next_round_at) if t is not None]
        grace = self.options.grace_seconds
        times += [
            s.away_since + grace for s in self.seats if s is not None and s.away_since is not None
        ]
        return min(times) if times else None

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
        self._require_open()
        existing = self.seat_of(player)
        if existing is not None:
            if seat is None or seat == existing:
                return existing
            raise RoomError(ErrorCode.ALREADY_SEATED, f"you already sit in seat {existing}")
        self._check_invite(player, invite)
        if seat is None:
            free = [i for i, s in enumerate(self.seats) if s is None]
            if not free:
                raise RoomError(ErrorCode.TABLE_FULL, "every seat is taken")
            seat = free[0]
        elif not 0 <= seat < len(self.seats):
            raise RoomError(ErrorCode.BAD_MESSAGE, f"seat must be 0 to {len(self.seats) - 1}")
        elif self.seats[seat] is not None:
            raise RoomError(ErrorCode.SEAT_TAKEN, f"seat {seat} is taken")
        self.spectators.discard(player)
        self.seats[seat] = Seat(player=player, name=name, ready=bot, bot=bot)
        if self.status == "playing":
            self.newcomers.add(seat)
        self.outcome.seated.append(player)
        self._event(v1.SeatTaken(seat=seat, player=player, name=name, bot=bot))
        return seat

    def spectate(self, player: str, invite: str | None) -> None:
        """Let ``player`` watch."""
        self._require_open()
        if self.seat_of(player) is not None:
            return
        self._check_invite(player, invite)
        if player not in self.spectators:
            self.spectators.add(player)
            self._info_dirty = True

    def leave(self, player: str, now: float) -> None:
        """Give up a seat (after the current round if the player is in it) or stop watching."""
        seat = self.seat_of(player)
        if seat is None:
            if player in self.spectators:
                self.spectators.discard(player)
                self._info_dirty = True
                return
            raise RoomError(ErrorCode.NOT_SEATED, "you are not at this table")
        self._abandon(seat, now, "left")
        self._settle(now)

    def _abandon(self, seat: int, now: float, reason: str) -> None:
        """A player leaves (or stayed away past the grace period): free the seat now, or
        after the round they are playing (a solitaire is resigned at once)."""
        occupant = self.seats[seat]
        assert occupant is not None
        if self._in_round(seat):
            occupant.leaving = True
            quit_now = self.adapter.leave_action(self.engine)
            if quit_now is not None:
                self._apply(seat, quit_now)
            self._settle(now)
            if self._in_round(seat):
                return
        if self.seats[seat] is occupant:
            self._free(seat, reason)

    def bot_seats(self, player: str, wanted: int) -> int:
        """Host only: how many of ``wanted`` bots can sit down now (at least one)."""
        if player != self.host:
            raise RoomError(ErrorCode.NOT_HOST, "only the host can add bots")
        self._require_open()
        free = sum(1 for seat in self.seats if seat is None)
        if free == 0:
            raise RoomError(ErrorCode.TABLE_FULL, "every seat is taken")
        return min(wanted, free)

    # ------------------------------------------------------------------ bots the host manages
    def remove_bot(self, player: str, seat: int, now: float) -> None:
        """Host only: the bot in ``seat`` leaves, as a player who leaves would (after the round
        it is playing). Its client sees its seat freed and disconnects."""
        if player != self.host:
            raise RoomError(ErrorCode.NOT_HOST, "only the host can remove a bot")
        self._require_open()
        occupant = self.seats[seat] if 0 <= seat < len(self.seats) else None
        if occupant is None or not occupant.bot:
            raise RoomError(ErrorCode.BAD_MESSAGE, f"seat {seat} holds no bot")
        self._abandon(seat, now, "kicked")
        self._settle(now)

    def bot_names(self, count: int, strategy: str, skip: int = 0) -> list[str]:
        """``count`` display names for new bots, none used at this table yet: a first name
        from :data:`BOT_NAMES` (after the first ``skip``) and the bot's strategy."""
        taken = {s.name.split(" (")[0] for s in self.seats if s is not None}
        free = [n for n in BOT_NAMES[skip:] + BOT_NAMES[:skip] if n not in taken]
        label = BOT_STRATEGY_LABELS.get(strategy, strategy)
        return [f"{free[i % len(free)]} ({label})" for i in range(count)]

    def set_ready(self, player: str, ready: bool) -> None:
        """Mark a seated player ready (or not) to play."""
        seat = self._seat_required(player)
        occupant = self.seats[seat]
        assert occupant is not None
        if occupant.ready != ready:
            occupant.ready = ready
            self._event(v1.ReadyChanged(seat=seat, ready=ready))

    def start(self, player: str, now: float, seed: str) -> None:
        """Host only: start a game with the ready players, shuffled from ``seed``."""
        if player != self.host:
            raise RoomError(ErrorCode.NOT_HOST, "only the host can start the game")
        if self.status not in ("open", "finished"):
            raise RoomError(ErrorCode.GAME_RUNNING, "a game is already running")
        players = self._ready_seats()
        if len(players) < self.adapter.min_players:
            raise RoomError(
                ErrorCode.NOT_ENOUGH_PLAYERS,
                f"{self.adapter.min_players} ready players are needed, {len(players)} are ready",
            )
        self.begin(now, seed)

    def begin(self, now: float, seed: str) -> None:
        """Start a new game now (solitaire sessions start at once; tables via :meth:`start`).

        A numbered deal ignores ``seed``: its seed is public, so anyone can replay it."""
        if self.deal is not None:
            seed = self.adapter.deal_seed(self.deal)
        self.engine = self.adapter.create(self.options, seed)
        self.newcomers.clear()
        self.status = "playing"
        self._info_dirty = True
        self._event(
            v1.GameStarted(
                game=self.adapter.name, commitment=self.engine.commitment, deal=self.deal
            )
        )
        self._run_system(now)
        self._settle(now)

    def act(self, player: str, action: dict[str, Any], now: float) -> None:
        """Play ``action`` (its wire form) for the player's own seat."""
        seat = self._seat_required(player)
        if self.engine is None:
            raise RoomError(ErrorCode.NOT_IN_ROUND, "no game is running at this table")
        try:
            move = msgspec.convert(action, self.adapter.action_type)
        except msgspec.ValidationError as error:
            raise RoomError(ErrorCode.BAD_ACTION, f"not an action of this game: {error}") from None
        self._apply(seat, move)
        self._settle(now)

    def presence(self, player: str, connected: bool, now: float) -> None:
        """Note that a seated player's connection dropped or came back."""
        seat = self.seat_of(player)
        if seat is None:
            return
        occupant = self.seats[seat]
        assert occupant is not None
        if occupant.connected == connected:
            return
        occupant.connected = connected
        occupant.away_since = None if connected else now
        self._event(v1.PresenceChanged(seat=seat, connected=connected))

    def tick(self, now: float) -> None:
        """Do what is due: default actions, the next round, freeing abandoned seats."""
        if self.turn_deadline is not None and now >= self.turn_deadline and self.engine is not None:
            for seat in self.turn_seats:
                action = self.engine.default_action(seat)
                if action is not None:
                    self._event(v1.TimedOut(seat=seat, action=action))
                    self._apply(seat, action)
            self.turn_deadline = None
        if self.next_round_at is not None and now >= self.next_round_at:
            self.next_round_at = None
            self._run_system(now)
        grace = self.options.grace_seconds
        for index, occupant in enumerate(self.seats):
            if (
                occupant is not None
                and occupant.away_since is not None
                and now >= occupant.away_since + grace
            ):
                occupant.away_since = None
                self._abandon(index, now, "timeout")
        self._settle(now)

    def resume(self, now: float) -> None:
        """After the room moved to another node: the player on turn gets a full turn again
        (nobody could act while no node hosted the table), and every player counts as away
        until their client resyncs here."""
        if self.turn_deadline is not None:
            seconds = self.adapter.turn_seconds(self.options)
            self.turn_deadline = None if seconds is None else now + seconds
        if self.next_round_at is not None:
            self.next_round_at = max(self.next_round_at, now)
        for occupant in self.seats:
            if occupant is not None and occupant.connected:
                self.presence(occupant.player, False, now)  # back when they resync here
        self._info_dirty = True

    def fingerprint(self) -> tuple[Any, ...]:
        """What a timer tick can change; equal before and after means the tick did nothing."""
        return (
            self.seq,
            self.status,
            self.turn_deadline,
            self.next_round_at,
            tuple(None if s is None else (s.leaving, s.away_since) for s in self.seats),
        )

    def close(self, reason: str) -> None:
        """End the room for good."""
        self.status = "closed"
        self.turn_deadline = self.next_round_at = None
        self.turn_seats = ()
        self.legal_now = {}
        self._event(v1.TableClosed(reason=reason))
        self.outcome.closed = True

    # ------------------------------------------------------------------ output
    def flush(self) -> Broadcast | None:
        """Return the broadcast of everything queued since the last flush, or ``None``."""
        if not self._pending and not self._info_dirty:
            return None
        pending, self._pending = self._pending, []
        events = [v1.Numbered(seq=e.seq, event=e.event) for e in pending]
        seat_events: dict[int, list[v1.Numbered]] = {}
        for seat in {s for e in pending for s in e.seat_events}:
            seat_events[seat] = [
                v1.Numbered(seq=e.seq, event=e.seat_events.get(seat, e.event)) for e in pending
            ]
        view = seat_views = None
        if self.engine is not None:
            view = self.engine.view(None)
            seat_views = {}
            if not self.adapter.same_view_for_all:
                for index, occupant in enumerate(self.seats):
                    if occupant is not None and (mine := self.engine.view(index)) != view:
                        seat_views[index] = mine
        info = self.info() if self._info_dirty else None
        self._info_dirty = False
        return Broadcast(
            table=self.id,
            seq=self.seq,
            events=events,
            seat_events=seat_events,
            view=view,
            seat_views=seat_views or {},
            legal=dict(self.legal_now),
            deadline=self.turn_deadline,
            info=info,
        )

    def take_outcome(self) -> Outcome:
        """Return and reset the side effects queued since the last call."""
        outcome, self.outcome = self.outcome, Outcome()
        return outcome

    # ------------------------------------------------------------------ internals
    def _event(self, event: Any, seat_events: dict[int, Any] | None = None) -> None:
        self.seq += 1
        entry = _Entry(self.seq, event, seat_events or {})
        self.log.append(entry)
        self._pending.append(entry)
        if isinstance(event, _INFO_EVENTS):
            self._info_dirty = True

    def _engine_events(self, events: list[Any]) -> None:
        engine = self.engine
        same_for_all = self.adapter.same_view_for_all
        for event in events:
            public = engine.event_view(event, None)
            private = {}
            for index, occupant in enumerate(self.seats):
                if occupant is not None and not same_for_all:
                    mine = engine.event_view(event, index)
                    if mine != public:
                        private[index] = mine
            self._event(public, private)

    def _apply(self, seat: int, action: Any) -> None:
        try:
            events = self.engine.apply(seat, action)
        except Rejected as rejected:
            raise RoomError(ErrorCode(rejected.reason.value), rejected.detail) from None
        self._engine_events(events)
        self._acted = True

    def _run_system(self, now: float) -> None:
        """Play the system's own actions (BlackDrez: start the next round) while there are any."""
        while self.engine is not None and not self.engine.over:
            seats = self._round_seats()
            step = self.adapter.system_action(self.engine, seats, sorted(self.newcomers))
            if step is None:
                return
            seat, action = step
            self._apply(seat, action)
            self.newcomers.difference_update(seats)
            self._info_dirty = True

    def _settle(self, now: float) -> None:
        """After any change: auto-play for leaving players, rounds, timers, game end."""
        self._autoplay(now)
        engine = self.engine
        if engine is None or self.status != "playing":
            return
        if engine.over:
            self._finish()
            return
        if self.adapter.between_rounds(engine):
            for index, occupant in enumerate(self.seats):
                if occupant is not None and occupant.leaving:
                    self._free(index, "left" if occupant.connected else "timeout")
            if self.next_round_at is None:
                self.next_round_at = now + self.adapter.round_pause(self.options)
            self.turn_deadline = None
            self.turn_seats = ()
            self.legal_now = {}
            return
        self.legal_now = {
            i: moves for i, s in enumerate(self.seats) if s is not None and (moves := self.legal(i))
        }
        on_turn = tuple(self.legal_now)
        if self._acted or on_turn != self.turn_seats:
            self.turn_seats = on_turn
            seconds = self.adapter.turn_seconds(self.options)
            self.turn_deadline = None if seconds is None or not on_turn else now + seconds
        self._acted = False

    def _autoplay(self, now: float) -> None:
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

    def _finish(self) -> None:
        self.status = "finished"
        self.turn_deadline = self.next_round_at = None
        self.turn_seats = ()
        self.legal_now = {}
        self._info_dirty = True
        score = self.adapter.final_score(self.engine)
        if score is not None and self.seats[0] is not None and self.deal is None:
            self.outcome.scores.append((self.seats[0].player, self.seats[0].name, score))
        for seat in self.seats:
            if seat is not None and not seat.bot:
                seat.ready = False
        # Who left (or was removed) during the last round goes now: no round end will come.
        for index, seat in enumerate(self.seats):
            if seat is not None and seat.leaving:
                self._free(index, "left" if seat.connected else "timeout")

    def _free(self, seat: int, reason: str) -> None:
        occupant = self.seats[seat]
        assert occupant is not None
        self.seats[seat] = None
        self.outcome.unseated.append(occupant.player)
        self._event(v1.SeatFreed(seat=seat, reason=reason))
        if occupant.player == self.host:
            others = [s for s in self.seats if s is not None and not s.bot]
            if others:
                self.host = others[0].player
        if all(s is None or s.bot for s in self.seats) and not self.spectators:
            self.close("everyone left")

    def _in_round(self, seat: int) -> bool:
        return (
            self.engine is not None
            and not self.engine.over
            and self.adapter.in_round(self.engine, seat)
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

    def _require_open(self) -> None:
        if self.status == "closed":
            raise RoomError(ErrorCode.NOT_FOUND, "this table is closed")

    def _check_invite(self, player: str, invite: str | None) -> None:
        if self.invite is not None and player != self.host and invite != self.invite:
            raise RoomError(ErrorCode.INVITE_REQUIRED, "this table is private: an invite is needed")
