"""An arena's scoring: points by place, a streak bonus, the standings' order (pure, no I/O).

Theory of operation
-------------------
An arena is a tournament of a fixed length, as lichess's arenas: while it runs, its players are
paired into new tables as soon as they are free (the matchmaking queue, with the arena as its
own pool), and every game they finish scores points:

* **By place.** A player scores one point for each player who placed below them at the table
  (:func:`place_points`): the winner of a table of four scores 3, the last 0; players who share
  a place share its points (each scores as if the others sharing it were not there).
* **On fire.** After two wins in a row (first place, shared or not) a player is *on fire*: their
  points are doubled until they fail to win (:data:`FIRE_AFTER`). The flame is shown.
* **The order.** Most points first; then most wins; then most games; then who joined first.

Only games that end before the arena does are scored. :func:`scored` applies one game to a
player's :class:`Standing` and returns the new one: the standings are the fold of the games in
any order of *different* players, and the store applies each game once (by its id).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

FIRE_AFTER = 2
"""Wins in a row after which a player's points are doubled (until a game they do not win)."""


class Standing(msgspec.Struct, kw_only=True, frozen=True):
    """One player's standing in an arena."""

    player: str
    name: str
    bot: bool = False
    joined: float = 0.0
    """When they first joined the arena (wall-clock seconds): the last tie-break."""
    points: int = 0
    games: int = 0
    wins: int = 0
    streak: int = 0
    """Wins in a row up to now."""
    results: list[int] = []
    """Points each game scored, oldest first (a streak's doubled points as scored)."""
    active: bool = True
    """Still paired: False once they left the arena (their points stay)."""

    @property
    def on_fire(self) -> bool:
        """Their next win scores double."""
        return self.streak >= FIRE_AFTER


def place_points(place: int, places: Iterable[int]) -> int:
    """The points of a player at ``place`` (1 = first) at a table whose players took
    ``places`` (theirs included): one for each player placed strictly below them."""
    return sum(1 for other in places if other > place)


def scored(standing: Standing, place: int, places: list[int]) -> Standing:
    """``standing`` after one more game where the player took ``place`` among ``places``."""
    points = place_points(place, places)
    won = place == 1
    if standing.on_fire and won:
        points *= 2
    return msgspec.structs.replace(
        standing,
        points=standing.points + points,
        games=standing.games + 1,
        wins=standing.wins + (1 if won else 0),
        streak=standing.streak + 1 if won else 0,
        results=[*standing.results, points],
    )


def ordered(standings: Iterable[Standing]) -> list[Standing]:
    """The standings in their order (see the module docstring)."""
    return sorted(standings, key=lambda s: (-s.points, -s.wins, -s.games, s.joined, s.player))
