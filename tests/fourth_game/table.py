"""Higher or Lower as the rest of the project sees it: a solitaire of one deck, one shuffle."""

from __future__ import annotations

from typing import Any

from blackdrez.games.cards import standard_deck
from blackdrez.games.spec import GameSpec
from tests.fourth_game import bots, rules


class HigherOrLowerSpec(GameSpec):
    """Higher or Lower: guess whether the next card ranks higher or lower."""

    name = "higher_or_lower"
    display_name = "Higher or Lower"
    rules_text = (
        "A card is turned up. Say whether the next card ranks higher or lower (Ace low, King "
        "high): a right guess scores a point, a wrong one (a tie too) ends the game. Five right "
        "guesses win; stop whenever you like to keep your score."
    )
    engine = rules.HigherOrLower
    config = rules.Config
    action = rules.Action
    event = rules.Event
    view = rules.View
    resign = rules.Stop
    strategies = bots.STRATEGIES

    def deck(self, config: Any) -> list[str]:
        return standard_deck()

    def outcome(self, result: Any, seat: int) -> tuple[int | None, int | None, bool]:
        return None, result.score, result.won
