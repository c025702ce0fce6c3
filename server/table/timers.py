"""A room's clock: whose turn it is and until when, the next deal, the end of a wait, closing.

Theory of operation
-------------------
:class:`Timers` holds every deadline of one room; the room sets them as its status changes and
asks :meth:`Timers.next` when its timer should fire next (``Room.next_deadline``), and
:meth:`Timers.should_close` whether a deserted table is due to close. The turn is armed after
every command (:meth:`Timers.arm_turn`): the seats with legal actions, and a fresh turn timer
whenever someone acted or the seats on turn changed.

A room whose timer fires more than :data:`RUNAWAY_RATE` times a second (beyond a burst of
:data:`RUNAWAY_BURST`) with no player acting in between is stopped (:class:`TimerBudget`; see
:func:`blackdrez.server.table.commands.timer_entry`): its host logs a ``stop`` that closes it, and
reports it. A timer fires only when a deadline is due, and each firing uses one up; a game comes
near that rate only when its players act the instant they may at a table with no pause between
rounds (bots on a fast node: a deal after every round, over a hundred a second), and then a
player acts between every two deals, which refills the budget. The guard keeps a bug from ever
spinning a node again. Players' requests are not counted: each is one message of a
rate-limited connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from blackdrez.server.table import parts
from blackdrez.server.table.lifecycle import TableStatus
from blackdrez.server.table.seating import Seat

RUNAWAY_RATE = 100.0
"""Timer firings per second a table may keep up (one per round or turn timeout at most)."""
RUNAWAY_BURST = 500.0
"""Timer firings a table may have at any speed before :data:`RUNAWAY_RATE` applies."""

_CLOSABLE = (TableStatus.OPEN, TableStatus.FINISHED)
"""The statuses in which a deserted table closes (no game is running)."""


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

    def acted(self) -> None:
        """A player acted: the firings so far were the game's (its deals come between the
        players' actions, however fast they play), not a runaway timer's."""
        self.tokens = RUNAWAY_BURST


class Timers:
    """The deadlines of one room (see the module docstring)."""

    def __init__(self, turn_seconds: float | None, close_at: float) -> None:
        self.turn_seconds = turn_seconds
        """The game's turn timer at this table (``None``: no timer)."""
        self.turn_deadline: float | None = None
        self.turn_seats: tuple[int, ...] = ()
        self.legal_now: dict[int, list[Any]] = {}
        """Each seat's legal actions as of the last change (only seats that have some)."""
        self.next_round_at: float | None = None
        """While ``between_rounds``: when the next round is dealt."""
        self.waiting_until: float | None = None
        """While ``waiting``: when the game ends unless two seats can play again."""
        self.close_at: float | None = close_at
        """While deserted: from when the table closes (once no game is running)."""
        self.budget = TimerBudget()

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        parts.restore(self, pickled)

    def arm_turn(self, now: float, legal_now: dict[int, list[Any]], acted: bool) -> None:
        """A round is played: ``legal_now`` are the seats on turn; the turn timer starts again
        when someone ``acted`` or those seats changed."""
        self.legal_now = legal_now
        on_turn = tuple(legal_now)
        if acted or on_turn != self.turn_seats or self.turn_deadline is None:
            self.turn_seats = on_turn
            seconds = self.turn_seconds
            self.turn_deadline = None if seconds is None or not on_turn else now + seconds

    def stop_turn(self) -> None:
        """No round is played: nobody is on turn, no turn timer."""
        self.turn_deadline = None
        self.turn_seats = ()
        self.legal_now = {}

    def stop(self) -> None:
        """The room closed: no deadline any more."""
        self.stop_turn()
        self.next_round_at = self.waiting_until = self.close_at = None

    def next(self, status: TableStatus, seats: Sequence[Seat | None], grace: float) -> float | None:
        """The earliest deadline: a turn, a deal, a wait, a close (once no game runs), a
        disconnected player's grace."""
        # (asked after every command: compared in turn, no list built)
        earliest = self.turn_deadline
        for t in (self.next_round_at, self.waiting_until):
            if t is not None and (earliest is None or t < earliest):
                earliest = t
        t = self.close_at
        if t is not None and (earliest is None or t < earliest) and status in _CLOSABLE:
            earliest = t
        for seat in seats:
            if seat is not None and seat.away_since is not None:
                t = seat.away_since + grace
                if earliest is None or t < earliest:
                    earliest = t
        return earliest

    def should_close(self, now: float, status: TableStatus) -> bool:
        """Whether the rules say the room should be closed by ``now``: deserted, and no game
        running (a game waiting for players past the end of its wait is over)."""
        if self.close_at is None or now < self.close_at:
            return False
        if status in _CLOSABLE:
            return True
        return self.waiting_until is not None and now >= self.waiting_until
