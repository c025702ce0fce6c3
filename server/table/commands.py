"""The logged commands of a table, executing them, and rebuilding a room from its log. No I/O.

Theory of operation
-------------------
Everything that changes a room is a *command*: a player's request (join, ready, act...), or the
host's own (create, begin, a timer tick, resume after a move to another node, the seated
players' ratings read from the records). The host runs a
command with :func:`execute` and, before anyone hears of its effects, appends it to the table's log
as an :class:`LogEntry` carrying the time it ran, who sent it, and the seed it used if it started a
game. A room is deterministic given its commands and their times, so :func:`rebuild` rebuilds
exactly the same room (same seats, engine state, event numbers and event log) on any node: that is
how a table survives the death of its node, and how a failed log write is undone.

A command that changes nothing (a second ``ready``, a presence that was already known, a timer
with nothing due...) leaves ``Room.version`` as it was: the host neither logs nor
broadcasts it, so a replay never sees it either.

A due timer runs :func:`timer_entry`'s command: a :class:`Tick`, or a :class:`Stop` when the
room's timer fires faster than any game can (a bug, never a player, makes that happen). The stop
is logged like any command, so a replay closes the room at the same point.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import msgspec

from blackdrez.games import GAMES
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.table.room import RUNAWAY_RATE, GameOver, Room, RoomError


class Create(msgspec.Struct, tag="create", tag_field="type", kw_only=True):
    """The first command of every room."""

    table: str
    game: str
    host: str
    options: v1.TableOptions
    listed: bool
    invite: str | None = None
    deal: int | None = None
    daily: str | None = None
    """The UTC day of the daily deal a solitaire session plays (its seed comes with begin)."""
    ranked: bool = False
    spectator_chat: bool = True
    """Spectators may write in the chat (``create_table.spectator_chat``)."""
    arena: str | None = None
    """The arena the table was made for by the matchmaking queue."""


class Begin(msgspec.Struct, tag="begin", tag_field="type"):
    """Start a solitaire session's game at once."""


class Tick(msgspec.Struct, tag="tick", tag_field="type"):
    """A timer fired: default actions, the next round, abandoned seats."""


class Stop(msgspec.Struct, tag="stop", tag_field="type"):
    """Close a room whose timer fires faster than any game can (see :func:`timer_entry`)."""

    reason: str


class Resume(msgspec.Struct, tag="resume", tag_field="type"):
    """The room was adopted by another node."""


class ParFound(msgspec.Struct, tag="par_found", tag_field="type"):
    """The host computed the par of the room's game number ``game`` (off the event loop: see
    ``Room.par_wanted``); logged so that a rebuilt room emits the same par without searching."""

    game: int
    par: dict[str, Any] | None


class ConnectionChanged(msgspec.Struct, tag="connection", tag_field="type"):
    """A player's connection to a table dropped or came back (sent by the player's node)."""

    table: str
    connected: bool


class GivenHint(msgspec.Struct, array_like=True):
    """A hint as given: the move (wire form) and the bot that chose it."""

    action: Any
    by: str


class Ratings(msgspec.Struct, tag="ratings", tag_field="type"):
    """The seated players' ratings, as the host node read them from the records (a rated table
    shows them): logged like any command, so every replay shows the same."""

    ratings: dict[str, v1.SeatRating]


Command = (
    v1.ClientMessage
    | ConnectionChanged
    | Begin
    | Tick
    | Stop
    | Resume
    | ParFound
    | Ratings
    | Create
)


class LogEntry(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One logged command."""

    now: float
    command: Command
    player: str = ""
    name: str = ""
    bot: bool = False
    seed: str | None = None
    hint: GivenHint | None = None
    """A ``hint``'s move as the node's worker chose it (``None``: the room asks its quick bot)."""
    seq: int = 0
    """The room's last event number after the command (acknowledged actions are checkable)."""


class Answer(msgspec.Struct):
    """What a request produced for its requester (typed on the bus too: see
    ``blackdrez.server.bus``)."""

    replies: list[v1.ServerMessage] = []
    watch: tuple[str, int | None, int] | None = None
    """``(table, seat, seq)``: the requester now watches ``table`` up to event ``seq``."""
    unwatch: str | None = None


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(LogEntry)

NEEDS_SEED = (v1.StartGame, Begin)
"""Commands that may start a game: the host draws a seed for them and logs it."""


def encode_entry(entry: LogEntry) -> bytes:
    """An entry as the bytes stored in the log."""
    return _encoder.encode(entry)


def decode_entry(data: bytes) -> LogEntry:
    """An entry from the bytes stored in the log."""
    return _decoder.decode(data)


def new_room(create: Create, now: float) -> Room:
    """The empty room a ``create`` command makes at ``now``."""
    return Room(
        create.table,
        GAMES[create.game],
        create.host,
        create.options,
        created=now,
        listed=create.listed,
        invite=create.invite,
        deal=create.deal,
        daily=create.daily,
        ranked=create.ranked,
        spectator_chat=create.spectator_chat,
        arena=create.arena,
    )


def execute(room: Room, entry: LogEntry) -> Answer:
    """Run one command on ``room``; raise :class:`RoomError` (nothing changed) if refused.

    ``room.version`` grows by one if and only if the command changed the room: only then must
    the host log it and broadcast the room's changes.
    """
    if type(entry.command) is v1.Act:
        # An action is refused (RoomError: nothing changed) or applied, and an applied action
        # changes the engine (``Room.applied`` grows): no need to compare everything before
        # and after (two keys of every seat, for every action).
        answer = _run(room, entry)
        room.version += 1
        return answer
    before = state_key(room)
    answer = _run(room, entry)
    if state_key(room) != before:
        room.version += 1
    return answer


def state_key(room: Room) -> tuple[Any, ...]:
    """Everything a command can change in ``room``, as one comparable value: equal before and
    after a command means it changed nothing (it need not be logged or broadcast).

    The engine's state changes only by an applied action, counted apart (and every applied
    action also adds events); a table info not yet broadcast is a change to send.
    """
    timers, assist = room.timers, room.assist
    return (
        room.log.seq,
        room.applied,
        room.status,
        room.seating.key(),
        timers.turn_deadline,
        timers.turn_seats,
        timers.next_round_at,
        timers.waiting_until,
        timers.close_at,
        tuple(sorted(room.newcomers)),
        room.log.info_dirty,
        assist.key() if assist is not None else None,
    )


def timer_entry(room: Room, now: float) -> LogEntry:
    """The command to run when ``room``'s timer fires at ``now``: a :class:`Tick`, or a
    :class:`Stop` once the timer fires faster than
    :data:`~blackdrez.server.table.room.RUNAWAY_RATE`."""
    if room.timers.budget.spend(now):
        return LogEntry(now=now, command=Tick())
    reason = f"stopped: its timer fired more than {RUNAWAY_RATE:.0f} times a second"
    return LogEntry(now=now, command=Stop(reason=reason))


def _run(room: Room, entry: LogEntry) -> Answer:
    command, player, now = entry.command, entry.player, entry.now
    if type(command) is v1.Act:  # (nearly every command: not after seven class patterns)
        room.act(player, command.action, now)
        return Answer(replies=[v1.Ok(id=command.id, seq=room.log.seq)])
    request_id = getattr(command, "id", None)
    match command:
        case v1.JoinTable():
            seat = room.join(
                player, entry.name, now, seat=command.seat, invite=command.invite, bot=entry.bot
            )
            return joined(room, player, request_id, seat)
        case v1.Spectate():
            room.spectate(player, command.invite, now)
            return joined(room, player, request_id, room.seating.watched_seat(player))
        case v1.LeaveTable():
            room.leave(player, now)
            return Answer(replies=[v1.Ok(id=request_id, seq=room.seq)], unwatch=room.id)
        case v1.SetReady():
            room.set_ready(player, command.ready, now)
        case v1.StartGame():
            room.start(player, now, _seed(entry))
        case Begin():
            room.begin(now, _seed(entry))
            return Answer()
        case v1.RemoveBot():
            room.remove_bot(player, command.seat, now)
        case v1.Hint():
            given = None if entry.hint is None else (entry.hint.action, entry.hint.by)
            action, by = room.hint(player, now, given)
            assert room.assist is not None
            hints = room.assist.hints
            reply = v1.HintReply(id=request_id, table=room.id, action=action, by=by, hints=hints)
            return Answer(replies=[reply])
        case v1.Undo():
            room.undo(player, now)
        case v1.Say() | v1.RemoveSpectator():
            room.chat_command(player, entry.name, command, now, entry.bot)
        case v1.Resync():
            watched = room.resync(player, now)
            return resynced(room, request_id, watched, command.since)
        case ConnectionChanged():
            room.presence(player, command.connected, now)
            return Answer()
        case Tick():
            room.tick(now)
            return Answer()
        case Stop():
            room.close(command.reason)
            return Answer()
        case Resume():
            room.resume(now)
            return Answer()
        case ParFound():
            room.par_found(command.game, command.par)
            return Answer()
        case Ratings():
            room.set_ratings(command.ratings, now)
            return Answer()
        case _:
            raise RoomError(ErrorCode.UNKNOWN_TYPE, "not a table request")
    return Answer(replies=[v1.Ok(id=request_id, seq=room.log.seq)])


def _seed(entry: LogEntry) -> str:
    if entry.seed is None:
        raise RoomError(ErrorCode.INTERNAL, "a game was started without a seed")
    return entry.seed


def rebuild(entries: list[bytes]) -> Room:
    """Rebuild a room from its whole log (the first entry creates it)."""
    return rebuild_games(entries)[0]


def rebuild_games(entries: list[bytes]) -> tuple[Room, list[GameOver]]:
    """Rebuild a room from its whole log, with every game that ended in it (oldest first): what
    an adopting node submits to the records again, in case its first host died before."""
    room = collections.deque(rebuilding(entries), maxlen=1)[0]
    room.flush()
    return room, room.take_outcome().games_over


def rebuilding(entries: list[bytes]) -> Iterator[Room]:
    """Rebuild a room from its log, yielding it after each entry (the same room every time)."""
    first = decode_entry(entries[0])
    if not isinstance(first.command, Create):
        raise ValueError("a room's log must start with its create command")
    room = new_room(first.command, first.now)
    yield room
    for index, data in enumerate(entries[1:], start=1):
        entry = decode_entry(data)
        try:
            execute(room, entry)
        except RoomError as error:
            # Only accepted commands are logged, so a refusal here means the replay diverged.
            raise ValueError(f"log entry {index} of {room.id} refused on replay: {error}") from None
        yield room


def joined(room: Room, player: str, request_id: int | None, seat: int | None) -> Answer:
    """The answer to a join or spectate: ``joined``, then a snapshot, and watching. A private
    table's invite goes to whoever it let in (its host, or someone who gave the invite), to
    pass on."""
    invite = room.invite
    snapshot = room.snapshot(seat)
    return Answer(
        replies=[
            v1.Joined(id=request_id, table=snapshot.info, seat=seat, invite=invite),
            snapshot,
        ],
        watch=(room.id, seat, room.seq),
    )


def resynced(room: Room, request_id: int | None, seat: int | None, since: int) -> Answer:
    """The answer to a resync: the missed events with the current view, or a snapshot."""
    events = room.log.since(since)
    if events is None:
        snapshot = room.snapshot(seat)
        snapshot.id = request_id
        return Answer(replies=[snapshot], watch=(room.id, seat, room.seq))
    update = v1.Update(
        id=request_id,
        table=room.id,
        seq=room.seq,
        events=events,
        view=room.view(seat),
        legal=room.legal(seat),
        deadline=room.timers.turn_deadline,
        info=room.info(),
    )
    return Answer(replies=[update], watch=(room.id, seat, room.seq))
