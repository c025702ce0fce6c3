"""Multiplayer ratings from a BlackDrez game's final ranking: Weng-Lin (openskill), Plackett-Luce.

Theory of operation
-------------------
Every player starts at ``mu`` 25, ``sigma`` 25/3 (openskill's defaults). After a rated game each
ranked player is one team of one, ranked by its place in the game's final ranking (equal places
tie); openskill's Plackett-Luce model (Weng & Lin, 2011) moves each ``mu`` by how surprising the
ranking was given everyone's ratings, and shrinks each ``sigma`` as evidence accumulates. The
leaderboards rank by the *ordinal* ``mu - 3 sigma``, a conservative estimate that starts at 0 and
rises both with wins and with games played.

Plackett-Luce fits a full ranking of any number of players, ties included, which is what a
BlackDrez game ends with (2 to 8 seats, equal piles sharing a place). Bots are rated on the same
scale as people (the store marks their rows), so a bot ladder and the humans' board compare.

This module is pure: the store reads the current ratings, calls :func:`rate`, and writes the new
ones in the same transaction as the game.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from openskill.models import PlackettLuce

from blackdrez.games import GAMES

MODEL = PlackettLuce()
"""The one rating model (openskill's defaults: mu 25, sigma 25/3, beta 25/6, tau 25/300)."""

RATED_GAMES = frozenset(name for name, spec in GAMES.items() if spec.rated)
"""Games with ratings (``GameSpec.rated``); the others rank by best score instead."""
PROFILE_GAME = min(RATED_GAMES)
"""The rated game whose rating history a profile shows, and the ratings API's default."""


class Rating(NamedTuple):
    """One player's rating: the mean ``mu`` and the uncertainty ``sigma``."""

    mu: float
    sigma: float

    @property
    def ordinal(self) -> float:
        """The conservative estimate ranked on the leaderboards: ``mu - 3 sigma``."""
        return self.mu - 3 * self.sigma


INITIAL = Rating(MODEL.mu, MODEL.sigma)
"""A new player's rating."""

PROVISIONAL_GAMES = 10
"""A rating is *provisional* (shown marked) until its player has played this many rated games:
before that one lucky or unlucky game moves it by several points."""


def provisional(games: int) -> bool:
    """Whether a rating after ``games`` rated games is still provisional."""
    return games < PROVISIONAL_GAMES


def rate(places: Mapping[str, int], current: Mapping[str, Rating]) -> dict[str, Rating]:
    """New ratings after a game where ``places[player]`` is each player's place (1 = first).

    ``current`` gives each player's rating before the game (a player missing from it starts at
    :data:`INITIAL`). Raises ``ValueError`` for fewer than two players or a place below 1.
    """
    if len(places) < 2:
        raise ValueError(f"a rated game needs at least two ranked players, not {len(places)}")
    if min(places.values()) < 1:
        raise ValueError(f"places start at 1: {dict(places)}")
    players = sorted(places)  # a fixed order: the same game always gives the same numbers
    teams = [[MODEL.rating(*current.get(player, INITIAL))] for player in players]
    rated = MODEL.rate(teams, ranks=[float(places[player]) for player in players])
    return {
        player: Rating(team[0].mu, team[0].sigma)
        for player, team in zip(players, rated, strict=True)
    }
