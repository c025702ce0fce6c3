"""Reference bot for Higher or Lower: guess the likelier side given the cards turned up."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from blackdrez.games.cards import rank_of, standard_deck
from tests.fourth_game.rules import Action, Higher, Lower, View


def odds(view: View, legal: Sequence[Action]) -> Action:
    """Higher when more of the unseen cards rank above the card showing, else lower."""
    unseen = [rank_of(card) for card in standard_deck() if card not in view.turned]
    showing = rank_of(view.card)
    above = sum(rank > showing for rank in unseen)
    below = sum(rank < showing for rank in unseen)
    return Higher() if above >= below else Lower()


STRATEGIES: dict[str, Callable[[View, Sequence[Action]], Action]] = {"odds": odds}
"""The reference bots by name."""
