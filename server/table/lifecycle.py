"""A table's lifecycle as code: its statuses, the changes between them, and which command each
status allows, refuses (with the error code) or ignores. Pure data, no I/O.

Theory of operation
-------------------
The room's :class:`TableStatus`, and what gets it out of each status::

    status          meaning                                  ways out
    open            seats being filled, no game yet          start; deserted: closes (1)
    playing         a round (or a solitaire game) is played  the round ends (turn timer) (2)
    between_rounds  the pause before the next deal           the pause ends: next deal
    waiting         between rounds, fewer than two can play  two can play again; or, after
                                                             grace_seconds, the game ends (3)
    finished        the game is over                         start; a join (clean table);
                                                             deserted: closes (1)
    closed          gone for good                            none: the node drops the room

(1) A table is *deserted* while no human holds a seat: bots and spectators do not keep open a
table people came to (a table only bots ever sat at, a bot swarm's, is deserted once no seat is
taken). A deserted table closes as soon as no game is running, whoever left last: host, player
(a disconnected player's seat is freed after ``grace_seconds``) or spectator. A game that goes on
with nobody seated ends at its wait for players (note 3). A table nobody ever sat at closes
``grace_seconds`` after it was created. ``Room.should_close`` says whether a close is due; the
node's sweeper asks it too, in case a timer was lost.
(2) A solitaire has no turn timer: its player's disconnect grace resigns it.
(3) RULES.md, "fewer than two can play": while the table waits no timer fires (but the one that
ends the wait) and nothing is logged; then the table ends the game with the usual ranking (reason
``players``).

Every command is first looked up in :data:`COMMANDS` (``room._check``): allowed, refused
with the error code shown, or ignored (``~``: accepted, changes nothing)::

    command    open          playing        between_rounds  waiting        finished   closed
    join       yes           yes (a)        yes (a)         yes (a)        yes (b)    not_found
    spectate   yes           yes            yes             yes            yes        not_found
    leave      yes           yes (c)        yes             yes            yes        not_found
    ready      yes           yes (d)        yes (d)         yes (d)        yes        not_found
    start      host (e)      game_running   game_running    game_running   host (e)   not_found
    add_bots   host          host           host            host           host       not_found
    remove_bot host          host (c)       host            host           host       not_found
    act        not_in_round  yes            not_your_turn   not_your_turn  game_over  not_found
    hint, undo not_in_round  yes (f)        not_your_turn   not_your_turn  game_over  not_found
    resync     yes           yes            yes             yes            yes        not_found
    say        yes (g)       yes (g)        yes (g)         yes (g)        yes (g)    not_found
    remove_sp. host (h)      host           host            host           host       not_found
    presence   yes           yes            yes             yes            yes        ~
    begin      yes           game_running   game_running    game_running   yes        not_found
    tick       yes           yes            yes             yes            yes        ~
    resume     yes           yes            yes             yes            yes        ~
    ratings    yes           yes            yes             yes            yes        ~
    close      yes           yes            yes             yes            yes        ~

(a) A newcomer plays from the next round on. (b) Joining a finished table clears the old game:
the table is open again and nobody is dropped into the last game's result. (c) A player in the
round plays on by the default action and the seat is freed when the round ends. (d) ``ready``
false during a game: the player finishes the round in play, then sits out the following rounds
(keeping the pile and the place in the ranking) until ready again. (e) The host who starts is
marked ready and plays (if seated); at least two ready players are needed. (f) Solitaire
sessions only (``not_a_solitaire`` otherwise), for the seated player; ``undo`` takes back only
moves since the last card was revealed (``nothing_to_undo``), see ``blackdrez.server.table.assist``.
(g) A line in the table's chat: by a seated player, or a spectator where the options allow
(``chat_closed``), see ``blackdrez.server.table.chat``. (h) ``remove_spectator``, the host
sending a spectator away.

A status changes only by :meth:`Room._enter`, along :data:`TRANSITIONS`. A start enters
``playing``; from there the status follows from the engine and the seats (:meth:`Room._settle`,
after every command)::

    open            -> playing (start), closed
    playing         -> between_rounds (the round ended), waiting (it ended and fewer than two
                       can play the next), finished (the game ended), closed
    between_rounds  -> playing (the deal), waiting (a player left or un-readied), finished (the
                       deal ended the game: stock too short, or a last round won on the deal),
                       closed
    waiting         -> between_rounds (two can play again), finished (grace over), closed
    finished        -> open (a newcomer joins), playing (start), closed

Every round ends in ``between_rounds`` (or ``waiting``) for the pause, even one won on the deal:
the next deal comes ``round_pause_seconds`` later, never in the same command.
"""

from __future__ import annotations

import enum
from typing import Literal, NamedTuple

from blackdrez.protocol.errors import ErrorCode


class TableStatus(enum.StrEnum):
    """Where a table is in its lifecycle (see the module docstring)."""

    OPEN = "open"
    PLAYING = "playing"
    BETWEEN_ROUNDS = "between_rounds"
    WAITING = "waiting"
    FINISHED = "finished"
    CLOSED = "closed"


GAME_RUNNING = frozenset({TableStatus.PLAYING, TableStatus.BETWEEN_ROUNDS, TableStatus.WAITING})
"""The statuses during a game."""

WIRE_STATUS: dict[TableStatus, Literal["open", "playing", "finished", "closed"]] = {
    TableStatus.OPEN: "open",
    TableStatus.PLAYING: "playing",
    TableStatus.BETWEEN_ROUNDS: "playing",
    TableStatus.WAITING: "playing",
    TableStatus.FINISHED: "finished",
    TableStatus.CLOSED: "closed",
}
"""``TableInfo.status`` for each status: the wire knows a game as ``playing`` throughout."""


class TableCommand(enum.StrEnum):
    """Everything that can be asked of a room: players' requests and the host node's own."""

    JOIN = "join"
    SPECTATE = "spectate"
    LEAVE = "leave"
    READY = "ready"
    START = "start"
    ADD_BOTS = "add_bots"
    REMOVE_BOT = "remove_bot"
    ACT = "act"
    RESYNC = "resync"
    HINT = "hint"
    UNDO = "undo"
    SAY = "say"
    REMOVE_SPECTATOR = "remove_spectator"
    PRESENCE = "presence"
    BEGIN = "begin"
    TICK = "tick"
    RESUME = "resume"
    RATINGS = "ratings"
    CLOSE = "close"


class Refusal(NamedTuple):
    """Why a command is refused in a status: the code on the wire and its message."""

    code: ErrorCode
    message: str


ALLOWED: Literal["allowed"] = "allowed"
IGNORED: Literal["ignored"] = "ignored"
Verdict = Literal["allowed", "ignored"] | Refusal

_NO_GAME = Refusal(ErrorCode.NOT_IN_ROUND, "no game is running at this table")
_RUNNING = Refusal(ErrorCode.GAME_RUNNING, "a game is already running")
_NO_ROUND = Refusal(ErrorCode.NOT_YOUR_TURN, "no round is in progress: wait for the next deal")
_OVER = Refusal(ErrorCode.GAME_OVER, "the game is over: the host may start another")
_GONE = Refusal(ErrorCode.NOT_FOUND, "this table is closed")


def _row(default: Verdict = ALLOWED, **exceptions: Verdict) -> dict[TableCommand, Verdict]:
    row = dict.fromkeys(TableCommand, default)
    row.update({TableCommand(name): verdict for name, verdict in exceptions.items()})
    return row


COMMANDS: dict[TableStatus, dict[TableCommand, Verdict]] = {
    TableStatus.OPEN: _row(act=_NO_GAME, hint=_NO_GAME, undo=_NO_GAME),
    TableStatus.PLAYING: _row(start=_RUNNING, begin=_RUNNING),
    TableStatus.BETWEEN_ROUNDS: _row(
        start=_RUNNING, begin=_RUNNING, act=_NO_ROUND, hint=_NO_ROUND, undo=_NO_ROUND
    ),
    TableStatus.WAITING: _row(
        start=_RUNNING, begin=_RUNNING, act=_NO_ROUND, hint=_NO_ROUND, undo=_NO_ROUND
    ),
    TableStatus.FINISHED: _row(act=_OVER, hint=_OVER, undo=_OVER),
    TableStatus.CLOSED: _row(
        _GONE, presence=IGNORED, tick=IGNORED, resume=IGNORED, ratings=IGNORED, close=IGNORED
    ),
}
"""For each status, each command: allowed, ignored, or refused (see the module docstring)."""

TRANSITIONS: dict[TableStatus, frozenset[TableStatus]] = {
    TableStatus.OPEN: frozenset({TableStatus.PLAYING, TableStatus.CLOSED}),
    TableStatus.PLAYING: frozenset(
        {
            TableStatus.BETWEEN_ROUNDS,
            TableStatus.WAITING,
            TableStatus.FINISHED,
            TableStatus.CLOSED,
        }
    ),
    TableStatus.BETWEEN_ROUNDS: frozenset(
        {TableStatus.PLAYING, TableStatus.WAITING, TableStatus.FINISHED, TableStatus.CLOSED}
    ),
    TableStatus.WAITING: frozenset(
        {TableStatus.BETWEEN_ROUNDS, TableStatus.FINISHED, TableStatus.CLOSED}
    ),
    TableStatus.FINISHED: frozenset({TableStatus.OPEN, TableStatus.PLAYING, TableStatus.CLOSED}),
    TableStatus.CLOSED: frozenset(),
}
"""The status changes there are (see the module docstring); staying put is always allowed."""


class RoomError(Exception):
    """A request the room refuses; ``code`` goes on the wire. Nothing was changed."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
