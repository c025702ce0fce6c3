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

Checking them. Every game of an arena is stored with the arena's id in the records (``GET
/api/v1/games?arena=ID``), its record verifiable as any other (``blackdrez verify``).
:func:`standings_of` folds those games into the standings they make, so anyone can compare the
standings the server pushed with the games it stored (``blackdrez arena --check ID``): the
points, games, wins and each game's points of every player must be the same.
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


class Placed(msgspec.Struct, frozen=True):
    """A player of a stored game and their place (``None``: not ranked); the records API's
    ``PlayerResult`` read as this (its other fields ignored)."""

    player: str
    name: str
    bot: bool
    place: int | None


class ArenaGame(msgspec.Struct, frozen=True):
    """A stored game of an arena as its standings need it (the records API's ``GameSummary``
    read as this)."""

    id: str
    started_at: float
    ended_at: float
    players: list[Placed]


def standings_of(games: Iterable[ArenaGame], ends: float) -> list[Standing]:
    """The standings that ``games`` make in an arena ending at ``ends``, in their order: each
    game that ended before ``ends`` scored once, each player's games in the order they ended.
    Who joined without playing is not in them, and ``joined`` is a player's first game's start
    (the live standings know when each joined): compare players, not the order of a tie."""
    table: dict[str, Standing] = {}
    unique = {game.id: game for game in games}.values()
    for game in sorted(unique, key=lambda g: (g.ended_at, g.id)):
        if game.ended_at >= ends:
            continue
        places = [p.place for p in game.players if p.place is not None]
        for p in game.players:
            if p.place is None:
                continue
            before = table.get(p.player) or Standing(
                player=p.player, name=p.name, bot=p.bot, joined=game.started_at
            )
            table[p.player] = scored(before, p.place, places)
    return ordered(table.values())


def scored_games(games: Iterable[ArenaGame], ends: float) -> tuple[int, int]:
    """How many of ``games`` an arena ending at ``ends`` scores (each once), and how many ended
    after it (stored, not scored)."""
    unique = {game.id: game for game in games}.values()
    late = sum(game.ended_at >= ends for game in unique)
    return len(unique) - late, late


def ordered(standings: Iterable[Standing]) -> list[Standing]:
    """The standings in their order (see the module docstring)."""
    return sorted(standings, key=lambda s: (-s.points, -s.wins, -s.games, s.joined, s.player))
