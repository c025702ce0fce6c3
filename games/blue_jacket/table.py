"""Blue Jacket as the rest of the project sees it: a solitaire with two decks, one shuffle.

The engine's defaults make the served game (the progress search on). A leaver resigns.

*Auto-finish* (:meth:`BlueJacketSpec.forced_finish`): once the stock is empty, if playing scoring
moves in any order wins (each card to the Aces pile, a foundation, or its row by interchange),
the rest is forced and the table plays it: a scoring move never takes a card off a foundation,
so none can spoil another.
"""

from __future__ import annotations

from typing import Any

from blackdrez.games.blue_jacket import bots, expert, rules, solver
from blackdrez.games.cards import standard_deck
from blackdrez.games.spec import GameSpec
from blackdrez.games.transcript import location


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

    refusals_count_from_1 = True  # its piles are r1.3, b2, as the browser shows them

    def action_words(self, action: Any) -> str:
        match action:
            case rules.Move(source=source, target=target):
                return f"move the card at {_place(source)} to {_place(target)}"
            case rules.Interchange(a=a, b=b):
                return f"interchange the cards of {_place(a)} and {_place(b)}"
            case rules.Deal():
                return "deal"
            case rules.Resign():
                return "resign"
        return super().action_words(action)

    def deck(self, config: Any) -> list[str]:
        return standard_deck(2)

    def par(self, engine: Any) -> dict[str, Any] | None:
        par = solver.deal_par(engine)
        return {"score": engine.score, "par": par.score, "exact": par.exact}

    def expert_hint(self, view: Any, legal: list[Any], context: Any) -> Any:
        return expert.hint(view)

    def forced_finish(self, engine: Any) -> list[Any]:
        if engine.over or engine.stock_count > 0:
            return []
        trial = type(engine).load(engine.dump())
        line: list[Any] = []
        while not trial.over:
            action = next((a for a in trial.legal_actions(0) if _scores(a)), None)
            if action is None:
                return []
            trial.apply(0, action)
            line.append(action)
        return line if trial.result().won else []


def _scores(action: Any) -> bool:
    """Whether an action puts a card on a foundation: a move to the Aces pile or to a row pile
    (a row pile takes only a card that builds on it, or its row's starter), or an interchange
    (both cards become their rows' starters)."""
    match action:
        case rules.Move(target=target):
            return not target.startswith("b")
        case rules.Interchange():
            return True
    return False


def _place(code: str) -> str:
    """A location in words (:func:`~blackdrez.games.transcript.location`), or as written when it
    names no location."""
    try:
        return location(code)
    except ValueError:
        return repr(code)
