"""Blackjack Piles as the rest of the project sees it: a solitaire with the engine's defaults.

Each of the seven rounds is shuffled on its own (context ``round:N``), so a record's dealt cards
come one list per round, from the config's first round on. A leaver resigns.
"""

from __future__ import annotations

from typing import Any

from games.blackjack_piles import bots, rules
from games.cards import standard_deck
from games.spec import GameSpec


class BlackjackPilesSpec(GameSpec):
    """Blackjack Piles: a solitaire in seven rounds."""

    name = "blackjack_piles"
    display_name = "Blackjack Piles"
    engine = rules.BlackjackPiles
    config = rules.Config
    action = rules.Action
    event = rules.Event
    view = rules.View
    resign = rules.Resign
    order_field = "decks"
    strategies = bots.STRATEGIES

    def deck(self, config: Any) -> list[str]:
        return standard_deck()

    def contexts(self, config: Any) -> list[str]:
        return [f"round:{number}" for number in range(config.first_round, rules.LAST_ROUND + 1)]
