"""Reference BlackDrez bots and a simulator to play them against each other.

A bot is a pure function of one seat's :class:`~blackdrez.games.blackdrez.rules.View` and that
seat's legal
actions; it never sees the engine or the stock. ``threshold`` hits below a fixed value;
``bust_probability`` counts the cards it has not seen (the deck minus every card in the view) and
hits while the chance that the next card busts it is acceptable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from blackdrez.games.base import Rejected
from blackdrez.games.blackdrez.rules import (
    ELEVEN,
    SYSTEM,
    Action,
    BlackDrez,
    Config,
    Hit,
    PotSplit,
    Stand,
    StartRound,
    View,
    Withdraw,
    hand_value,
)
from blackdrez.games.cards import pokerdrez_deck

Strategy = Callable[[View, list[Action]], Action]


def _has(legal: Sequence[Action], kind: type) -> bool:
    return any(type(action) is kind for action in legal)


def _my_seat(view: View) -> int:
    """A bot is asked to move only on its turn, so its seat is the one on turn."""
    if view.to_act is None:
        raise ValueError("nobody is on turn in this view")
    return view.to_act


def _my_value(view: View) -> int:
    value = view.seats[_my_seat(view)].value
    return 0 if value is None else value


def threshold(view: View, legal: list[Action], threshold: int = 8) -> Action:
    """Hit below ``threshold``; stand when allowed and hitting is not wanted; else withdraw."""
    value = _my_value(view)
    can_hit = _has(legal, Hit)
    if can_hit and value < threshold:
        return Hit()
    if _has(legal, Stand):
        return Stand()
    return Withdraw()


def unseen_cards(view: View) -> Counter[str]:
    """The cards this view does not show: the full deck minus hands, pot, carry-over and piles."""
    unseen = Counter(pokerdrez_deck(view.decks))
    seen: list[str] = [*view.pot, *view.carry_over, *view.set_aside]
    for seat in view.seats:
        seen.extend(seat.hand)
        seen.extend(seat.pile)
    unseen.subtract(seen)
    return +unseen


def bust_chance(view: View) -> float:
    """The probability that the next card busts the hand on turn, over the unseen cards."""
    hand = view.seats[_my_seat(view)].hand
    unseen = unseen_cards(view)
    total = sum(unseen.values())
    if total == 0:
        return 1.0
    busting = sum(count for card, count in unseen.items() if hand_value([*hand, card]) > ELEVEN)
    return busting / total


def bust_probability(view: View, legal: list[Action], max_risk: float = 0.5) -> Action:
    """Hit while the chance of busting on the next card is at most ``max_risk``.

    Otherwise stand when allowed, else withdraw.
    """
    if _has(legal, Hit) and bust_chance(view) <= max_risk:
        return Hit()
    if _has(legal, Stand):
        return Stand()
    return Withdraw()


STRATEGIES: dict[str, Strategy] = {"threshold": threshold, "bust_probability": bust_probability}
STRATEGY_LABELS = {"threshold": "threshold", "bust_probability": "bust odds"}
"""How a bot's strategy reads after its name at the table ("Ada (bust odds)")."""
BOT_NAMES = ("Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "June", "Kit")
"""First names of bots (more than the seven a table can hold), followed by their strategy."""


def simulate(
    games: int,
    seed: str,
    seats: int = 4,
    strategies: Sequence[str] | None = None,
    progress: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Play ``games`` complete games with the bots and return JSON-able statistics.

    Game ``i`` uses the seed ``f"{seed}:{i}"``. ``strategies`` names each seat's bot (default:
    the strategies alternating round the table); every seat plays every round. A win is a first
    place, shared or not. ``progress``, if given, is called after each game.
    """
    names = (
        list(strategies)
        if strategies is not None
        else [list(STRATEGIES)[seat % len(STRATEGIES)] for seat in range(seats)]
    )
    if len(names) != seats:
        raise ValueError(f"{len(names)} strategies for {seats} seats")
    for name in names:
        if name not in STRATEGIES:
            raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
    bots = [STRATEGIES[name] for name in names]
    everyone = list(range(seats))
    rounds = actions = splits = rejected = 0
    wins_by_seat = [0] * seats
    wins_by_strategy = dict.fromkeys(STRATEGIES, 0)
    for index in range(games):
        engine = BlackDrez.new(Config(seats=seats), f"{seed}:{index}")
        while not engine.over:
            if engine.state.phase == "between_rounds":
                events = engine.apply(SYSTEM, StartRound(seats=everyone))
            else:
                seat = engine.state.to_act
                assert seat is not None
                choice = bots[seat](engine.view(seat), engine.legal_actions(seat))
                try:
                    events = engine.apply(seat, choice)
                except Rejected:
                    rejected += 1
                    events = engine.apply(seat, Withdraw())
            actions += 1
            splits += sum(1 for event in events if type(event) is PotSplit)
        result = engine.result()
        assert result is not None
        rounds += result.rounds
        for seat in result.ranking[0].seats:
            wins_by_seat[seat] += 1
            wins_by_strategy[names[seat]] += 1
        if progress is not None:
            progress()
    per_game = max(games, 1)
    return {
        "games": games,
        "seats": seats,
        "strategies": names,
        "rounds_per_game": rounds / per_game,
        "actions_per_game": actions / per_game,
        "wins_by_seat": wins_by_seat,
        "wins_by_strategy": wins_by_strategy,
        "split_share": splits / rounds if rounds else 0.0,
        "rejected_actions": rejected,
    }
