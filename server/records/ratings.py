"""Multiplayer ratings from a BlackDrez game's final ranking: Weng-Lin (openskill), Plackett-Luce.

Theory of operation
-------------------
Every player starts at ``mu`` 25, ``sigma`` 25/3 (openskill's defaults). After a rated game each
ranked player is one team of one, ranked by its place in the game's final ranking (equal places
tie); openskill's Plackett-Luce model (Weng & Lin, 2011) moves each ``mu`` by how surprising the
ranking was given everyone's ratings, and shrinks each ``sigma`` as evidence accumulates. The
leaderboards rank by the *ordinal* ``mu - 3 sigma``, a conservative estimate that starts at 0 and
rises both with wins and with games played.

People never see the ordinal itself (small numbers, negative after a first loss): every rating
shown is :func:`display`'s, on a 1500-based scale like chess sites' (a new player shows 1500).
The browser has the same function (``clients/browser/scale.js``); a test checks they agree.

Plackett-Luce fits a full ranking of any number of players, ties included, which is what a
BlackDrez game ends with (2 to 8 seats, equal piles sharing a place). Bots are rated on the same
scale as people (the store marks their rows), so a bot ladder and the humans' board compare.

This module is pure: the store reads the current ratings, calls :func:`rate`, and writes the new
ones in the same transaction as the game.
"""

from __future__ import annotations

import math
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


DISPLAY_BASE = 1500
"""What a new player's rating (ordinal 0) shows."""
DISPLAY_SCALE = 20
"""Shown points per unit of ordinal. With this game's luck a regular player's ordinal ends
between about 5 (weak) and 25 (good), 30 for the very best: 1600 to 2000, 2100, the range
chess players know; one rated game then moves a regular by 10 to 20 points, a new player by 40
to 70. (40 would put a good regular near 2500.)"""
DISPLAY_FLOOR = 100
"""The lowest rating shown (an ordinal of -70: never reached in practice)."""


def display(ordinal: float) -> int:
    """The rating people see for ``ordinal``: ``1500 + 20 * ordinal``, halves rounded up (as
    JavaScript's ``Math.round``), at least 100. Its twin is ``ratingDisplay`` in
    ``clients/browser/scale.js``: the same arithmetic, the same numbers."""
    return max(DISPLAY_FLOOR, math.floor(DISPLAY_BASE + DISPLAY_SCALE * ordinal + 0.5))


def change(before: float, after: float) -> int:
    """How a game moved the shown rating, from ordinal ``before`` to ``after``: the difference
    of the shown numbers (so "1512 -> 1526 (+14)" always adds up)."""
    return display(after) - display(before)


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
