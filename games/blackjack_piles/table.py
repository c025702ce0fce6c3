"""Blackjack Piles as the rest of the project sees it: a solitaire with the engine's defaults.

Its par (``solver``) is computed round by round.

Each of the seven rounds is shuffled on its own (context ``round:N``), so a record's dealt cards
come one list per round, from the config's first round on. A leaver resigns.
"""

from __future__ import annotations

from typing import Any

from blackdrez.games.blackjack_piles import bots, expert, rules, solver
from blackdrez.games.cards import standard_deck
from blackdrez.games.spec import GameSpec, and_words


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

    def action_words(self, action: Any) -> str:
        match action:
            case rules.Place(pile=pile):
                return f"place the stock's top card on pile {pile + 1}"
            case rules.Cash():
                tops = [f"pile {pile + 1}" for pile in action.piles]
                tops += ["the stock's top card"] if action.stock else []
                return f"cash the tops of {and_words(tops)}" if tops else "cash nothing"
            case rules.Move(source=source, target=target):
                return f"move the top card of pile {source + 1} to pile {target + 1}"
            case rules.EndRound():
                return "end the round"
            case rules.Resign():
                return "resign"
        return super().action_words(action)

    def deck(self, config: Any) -> list[str]:
        return standard_deck()

    def par(self, engine: Any) -> dict[str, Any] | None:
        rounds = [
            {"round": par.round, "score": result.score, "par": par.score, "exact": par.exact}
            for par, result in zip(
                solver.game_par(engine, solver.PAR_BUDGET), engine.state.results, strict=True
            )
        ]
        return {
            "score": engine.result().score,
            "par": sum(item["par"] for item in rounds),
            "exact": all(item["exact"] for item in rounds),
            "rounds": rounds,
        }

    def outcome(self, result: Any, seat: int) -> tuple[int | None, int | None, bool]:
        return None, result.score, result.completed

    def hint_context(self, engine: Any) -> list[str]:
        """The cards cashed this round (all shown to the player)."""
        return expert.seen_cashed(engine)

    def expert_hint(self, view: Any, legal: list[Any], context: Any) -> Any:
        return expert.hint(view, legal, context)

    def contexts(self, config: Any) -> list[str]:
        return [f"round:{number}" for number in range(config.first_round, rules.LAST_ROUND + 1)]
