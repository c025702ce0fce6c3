"""Who plays with whom: the matchmaker's pure core (no I/O, no clock of its own).

Theory of operation
-------------------
A player who asks for a game holds a :class:`Ticket`: their rating (the 1500-based number
people see; 1500 for anyone unrated), the table size they want (2 to 8, or ``None``: any),
rated or casual, when they started waiting, and whether empty seats may be filled with bots
after some seconds. :func:`pair` is run on every ticket waiting (by whichever node runs the
matchmaker, every :data:`TICK` seconds) and returns the tables to make.

* **Close ratings, a band that widens.** A ticket accepts opponents within its *band* of its
  own rating: :data:`BAND` at first, wider by :data:`WIDEN` each second of waiting, without
  limit after :data:`ANYONE_AFTER` seconds. Two tickets may share a table if each is within
  the other's band (so a fresh ticket's narrow band protects it too), or, once one of them has
  waited :data:`PATIENT` seconds, if the other is within that one's band: the longer wait
  decides. (Without that, a player rated far from everyone queueing starved: regulars who
  queue again at once after each game keep their bands narrow, and a newcomer at 1500 among
  regulars rated 1700-2000 was never placed, in the node and in the simulation alike.)
* **Oldest first.** Tickets are served in the order they started waiting: each, unless already
  placed, takes the candidates that suit it (same rated or casual, a table size both accept,
  mutual bands) nearest to its rating. A ticket wanting "any" size prefers a table of
  :data:`PREFERRED` seats, then the other sizes from the most players down.
* **Pools.** A ticket is paired only with tickets of its own pool: the queue open to all, or
  one arena's players (``blackdrez.games.arena``).
* **Bots after a while.** A ticket waiting longer than its ``bots_after`` gets a table now:
  with the suitable players there are, and bots in the other seats (labelled as bots at the
  table).

Nobody waits for ever: past :data:`ANYONE_AFTER` every band is unlimited, so two tickets that
accept a common size and the same rated or casual are always placed together.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

BAND = 100.0
"""Rating points either way a fresh ticket accepts."""
WIDEN = 25.0
"""Points the band grows by each second of waiting."""
ANYONE_AFTER = 60.0
"""Seconds after which a ticket accepts any rating."""
PATIENT = 15.0
"""Seconds of waiting after which a ticket's band alone decides whom it may be paired with."""
PREFERRED = 4
"""The table size a ticket wanting "any" tries first."""
SIZES = (2, 3, 4, 5, 6, 7, 8)
"""The table sizes a BlackDrez table may have."""
TICK = 0.5
"""Seconds between two pairings (the runtime's pace)."""


@dataclass(frozen=True, slots=True)
class Ticket:
    """One player waiting for a game."""

    player: str
    rating: float
    seats: int | None
    """The table size wanted, ``None``: any."""
    rated: bool
    since: float
    """When the player started waiting (seconds, the runtime's clock)."""
    bots_after: float | None = None
    """Seconds of waiting after which bots may fill the seats nobody takes (``None``: never)."""
    pool: str = ""
    """Who the ticket may be paired with: the same pool only (an arena's id; ``""``: the
    queue open to all)."""

    def band(self, now: float) -> float:
        """How far from its rating this ticket accepts opponents at ``now``."""
        waited = max(0.0, now - self.since)
        return math.inf if waited >= ANYONE_AFTER else BAND + WIDEN * waited

    def sizes(self) -> tuple[int, ...]:
        """The table sizes this ticket accepts, the preferred first."""
        if self.seats is not None:
            return (self.seats,)
        return (PREFERRED, *sorted((s for s in SIZES if s != PREFERRED), reverse=True))


@dataclass(frozen=True, slots=True)
class Match:
    """A table to make: its ``players`` (their tickets' order: the oldest first), its size, and
    how many of its seats bots take."""

    players: tuple[str, ...]
    seats: int
    rated: bool
    bots: int = 0


def suits(a: Ticket, b: Ticket, size: int, now: float) -> bool:
    """Whether ``a`` and ``b`` may share a table of ``size`` seats at ``now``."""
    return (
        a.rated == b.rated
        and a.pool == b.pool
        and (b.seats is None or b.seats == size)
        and (a.seats is None or a.seats == size)
        and abs(a.rating - b.rating) <= reach(a, b, now)
    )


def reach(a: Ticket, b: Ticket, now: float) -> float:
    """How far apart ``a``'s and ``b``'s ratings may be at ``now``: within both bands, or
    within the band of the one that has waited longer once it has waited :data:`PATIENT`."""
    older = a if a.since <= b.since else b
    if now - older.since >= PATIENT:
        return older.band(now)
    return min(a.band(now), b.band(now))


def pair(tickets: Iterable[Ticket], now: float) -> list[Match]:
    """The tables to make now from the waiting ``tickets`` (see the module docstring); a
    ticket is in one of them at most, and those in none wait on."""
    waiting = sorted(tickets, key=lambda t: (t.since, t.player))
    placed: set[str] = set()
    found: list[Match] = []
    for ticket in waiting:
        if ticket.player in placed:
            continue
        match = _table_for(ticket, [t for t in waiting if t.player not in placed], now)
        if match is not None:
            placed.update(match.players)
            found.append(match)
    return found


def _table_for(ticket: Ticket, free: list[Ticket], now: float) -> Match | None:
    """A table for ``ticket`` among the ``free`` tickets (itself included), or ``None``."""
    others = [t for t in free if t.player != ticket.player]
    with_bots = ticket.bots_after is not None and now - ticket.since >= ticket.bots_after
    best: tuple[int, list[Ticket]] | None = None
    for size in ticket.sizes():
        fitting = [t for t in others if suits(ticket, t, size, now)]
        fitting.sort(key=lambda t: (abs(t.rating - ticket.rating), t.since, t.player))
        group = _mutual(fitting, size - 1, size, now)
        if len(group) == size - 1:
            return Match(_players(ticket, group), size, ticket.rated)
        if with_bots and (best is None or len(group) > len(best[1])):
            best = (size, group)
    if best is None:
        return None
    size, group = best
    return Match(_players(ticket, group), size, ticket.rated, bots=size - 1 - len(group))


def _mutual(candidates: list[Ticket], wanted: int, size: int, now: float) -> list[Ticket]:
    """Up to ``wanted`` of ``candidates`` (in their order) that also suit each other."""
    group: list[Ticket] = []
    for candidate in candidates:
        if len(group) == wanted:
            break
        if all(suits(candidate, member, size, now) for member in group):
            group.append(candidate)
    return group


def _players(ticket: Ticket, group: list[Ticket]) -> tuple[str, ...]:
    ordered = sorted([ticket, *group], key=lambda t: (t.since, t.player))
    return tuple(t.player for t in ordered)


def spread(ratings: Iterable[float]) -> float:
    """The gap between the highest and the lowest rating of a table."""
    values = list(ratings)
    return max(values) - min(values) if values else 0.0
