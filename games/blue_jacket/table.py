"""Blue Jacket as the rest of the project sees it: a solitaire with two decks, one shuffle.

The engine's defaults make the served game (the progress search on). A leaver resigns.
"""

from __future__ import annotations

from typing import Any

from blackdrez.games.blue_jacket import bots, rules, solver
from blackdrez.games.cards import standard_deck
from blackdrez.games.spec import GameSpec


class BlueJacketSpec(GameSpec):
    """Blue Jacket: a two-deck solitaire."""

    name = "blue_jacket"
    display_name = "Blue Jacket"
    engine = rules.BlueJacket
    config = rules.Config
    action = rules.Action
    event = rules.Event
    view = rules.View
    resign = rules.Resign
    strategies = bots.STRATEGIES

    def deck(self, config: Any) -> list[str]:
        return standard_deck(2)

    def par(self, engine: Any) -> dict[str, Any] | None:
        par = solver.deal_par(engine)
        return {"score": engine.score, "par": par.score, "exact": par.exact}
