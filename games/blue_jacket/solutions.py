"""What Blue Jacket's solver returns, as msgspec Structs.

They live apart from the solver (:mod:`blackdrez.games.blue_jacket.solver`, which re-exports
them) so that the solver can be compiled (``blackdrez compile``, mypyc) while these stay plain
Python classes: msgspec reads a Struct's class keywords when the class is made, and mypyc does
not pass them on.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from blackdrez.games.blue_jacket.rules import Action

Outcome = Literal["winnable", "not_winnable", "unknown"]


class Solution(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`solve` found. ``moves`` (winnable only) replays from the position to a win;
    ``nodes`` counts positions expanded; ``best`` is the highest score seen on the way."""

    outcome: Outcome
    moves: list[Action]
    nodes: int
    best: int


class BestScore(msgspec.Struct, frozen=True, kw_only=True):
    """Perfect play's score from a position: ``exact`` unless the budget ran out (then ``score``
    is the best found, a lower bound)."""

    score: int
    exact: bool
    nodes: int


class DealResult(msgspec.Struct, frozen=True, kw_only=True):
    """One numbered deal solved: the outcome, solver nodes, CPU seconds, actions in the win."""

    deal: int
    outcome: Outcome
    nodes: int
    seconds: float
    actions: int
