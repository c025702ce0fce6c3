"""Reference bots for Blackjack Piles, and the simulation that measures the rounds table.

A bot is a pure function of the player's :class:`~blackdrez.games.blackjack_piles.rules.View` and
legal
actions; it never sees the stock below its top. :func:`greedy` looks one action ahead: it scores
the position each legal action leads to by the cards it removes and by how near the groups of
pile tops are to 21, one or two cards short (the *potential*, computed against a full deck's
value frequencies, since the view does not say which cards were cashed). The ``expert``
(:class:`~blackdrez.games.blackjack_piles.expert.PilesExpert`) counts the cards it has seen
instead and looks a stock card ahead.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Callable, Sequence

from blackdrez.games.blackjack_piles.expert import PilesExpert
from blackdrez.games.blackjack_piles.rules import (
    LAST_ROUND,
    MAX_HAND,
    ROUNDS,
    TARGET,
    Action,
    BlackjackPiles,
    Cash,
    Config,
    EndRound,
    Move,
    Place,
    View,
    card_points,
    missing_to_21,
    points_make_21,
)

Strategy = Callable[[View, list[Action]], Action]

_VALUE_ODDS = {value: (16 if value == 10 else 4) / 52 for value in range(1, 11)}
"""How likely a card drawn from a full deck is worth ``value`` (Ace 1, tens 10)."""


def _pair_odds(missing: int) -> float:
    """How likely two cards drawn (as if independently) can total ``missing``."""
    total = 0.0
    for first, second in itertools.product(_VALUE_ODDS, repeat=2):
        aces = (first == 1) + (second == 1)
        if any(first + second + 10 * soft == missing for soft in range(aces + 1)):
            total += _VALUE_ODDS[first] * _VALUE_ODDS[second]
    return total


_PAIR_ODDS = {missing: _pair_odds(missing) for missing in range(TARGET + 1)}

TWO_CARD_WEIGHT = 5.0
"""How much a group two cards short of 21 counts against one a single card short."""

CASH_WEIGHT = 4.0
"""How much one cashed card weighs against one unit of potential."""

FULL_PILE_PENALTY = 1.0
"""What a full pile costs: it takes no more cards, so it brings a stuck round nearer."""


def _completions(values: tuple[int, ...]) -> float:
    """How promising the group ``values`` (Aces as 1) is: the chance that the next card makes it
    exactly 21, plus :data:`TWO_CARD_WEIGHT` times the best chance that two more cards do."""
    needed, pairs = missing_to_21(values)
    pair = max((_PAIR_ODDS[missing] for missing in pairs), default=0.0)
    return sum(_VALUE_ODDS[value] for value in needed) + TWO_CARD_WEIGHT * pair


@functools.lru_cache(maxsize=1 << 16)
def _potential(tops: tuple[tuple[int, bool], ...], stock_in_hand: bool) -> float:
    """Sum, over groups of pile tops, of how near the group is to 21 (see :func:`_completions`).

    ``tops`` holds one ``(value, takes_a_card)`` per pile (value 0 = empty pile). Without the
    stock's top in hands, the completing card must first go on a pile outside the group.
    """
    cards = [(index, value) for index, (value, _) in enumerate(tops) if value]
    total = 0.0
    for size in range(1, min(MAX_HAND - 1, len(cards)) + 1):
        for group in itertools.combinations(cards, size):
            members = {index for index, _ in group}
            if not stock_in_hand and not any(
                takes for index, (_, takes) in enumerate(tops) if index not in members
            ):
                continue
            total += _completions(tuple(value for _, value in group))
    return total


def _cashable(cards: list[str]) -> bool:
    """Whether some 2-6 of ``cards`` total exactly 21."""
    return _points_cashable(tuple(sorted(card_points(card) for card in cards)))


@functools.lru_cache(maxsize=1 << 16)
def _points_cashable(points: tuple[int, ...]) -> bool:
    return any(
        points_make_21(group)
        for size in range(2, min(MAX_HAND, len(points)) + 1)
        for group in itertools.combinations(points, size)
    )


def _after(view: View, action: Action) -> tuple[list[list[str]], int]:
    """The piles after ``action`` and how many cards it removed from the table."""
    piles = [list(pile) for pile in view.piles]
    match action:
        case Place(pile):
            assert view.stock_top is not None
            piles[pile].append(view.stock_top)
            return piles, 0
        case Cash(indices, stock):
            for index in indices:
                piles[index].pop()
            return piles, len(indices) + stock
        case Move(source, target):
            piles[target].append(piles[source].pop())
    return piles, 0


def _position(view: View, piles: list[list[str]]) -> float:
    """How promising ``piles`` are: their :func:`_potential`, less a penalty per full pile."""
    cap = view.rules.cap
    tops = tuple(
        sorted(
            (card_points(pile[-1]) if pile else 0, cap is None or len(pile) < cap) for pile in piles
        )
    )
    full = sum(not takes for _, takes in tops)
    return _potential(tops, view.rules.stock_in_hand) - FULL_PILE_PENALTY * full


def greedy(view: View, legal: list[Action]) -> Action:
    """Cash when possible, else place or move where the most hands stay within reach.

    Each candidate is scored by the cards it removes (times :data:`CASH_WEIGHT`) plus the
    potential of the piles it leaves. When a hand can be cashed, only hands are candidates;
    otherwise placements, and moves that open a cash, are, with credit for a cash they open.
    With nothing worth doing the round is ended.
    """
    cashes: list[Action] = [action for action in legal if isinstance(action, Cash)]
    candidates = cashes or [action for action in legal if isinstance(action, Place | Move)]
    best: Action | None = None
    best_score = -math.inf
    for action in candidates:
        piles, removed = _after(view, action)
        score = CASH_WEIGHT * removed + _position(view, piles)
        if not cashes:
            if _cashable([pile[-1] for pile in piles if pile]):
                score += CASH_WEIGHT * 2
            elif isinstance(action, Move):
                continue
        if score > best_score:
            best, best_score = action, score
    if best is not None:
        return best
    return next((action for action in legal if isinstance(action, EndRound)), legal[0])


STRATEGIES: dict[str, Strategy] = {"greedy": greedy, "expert": PilesExpert()}
"""The reference bots by name (``expert``: :mod:`blackdrez.games.blackjack_piles.expert`)."""


def _play(engine: BlackjackPiles, strategy: Strategy, rounds: int) -> None:
    """Let ``strategy`` play until the game ends or ``rounds`` rounds have ended."""
    while not engine.over and len(engine.view(0).results) < rounds:
        view = engine.view(0)
        engine.apply(0, strategy(view, engine.legal_actions(0)))


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "mean": round(statistics.fmean(values), 4),
        "stdev": round(statistics.pstdev(values), 4),
        "min": min(values),
        "max": max(values),
    }


def simulate(
    games: int,
    seed: str,
    per_round: bool = False,
    strategy: str = "greedy",
    deals: int | None = None,
    rounds: Sequence[int] = tuple(range(1, LAST_ROUND + 1)),
    progress: Callable[[], None] | None = None,
) -> dict[str, object]:
    """Play ``games`` full games with the bot from seeds ``f"{seed}:{i}"`` and report scores.

    With ``per_round``, also play each of ``rounds`` in isolation on ``deals`` seeded deals
    (default ``games``; seeds ``f"{seed}:{r}:{i}"``) and report its pass rate (hands cashed >
    cards left), that rate's standard error, and the mean hands and cards left.
    ``progress``, if given, is called after each game and each deal of a round played alone.
    """
    bot = STRATEGIES[strategy]
    scores: list[float] = []
    reached: list[float] = []
    for i in range(games):
        engine = BlackjackPiles.new(Config(), f"{seed}:{i}")
        _play(engine, bot, LAST_ROUND)
        result = engine.result()
        scores.append(result.score)
        reached.append(result.last_round)
        if progress is not None:
            progress()
    report: dict[str, object] = {
        "game": BlackjackPiles.game,
        "strategy": strategy,
        "games": games,
        "seed": seed,
        "score": _stats(scores),
        "last_round": _stats(reached),
        "completed": sum(r == LAST_ROUND for r in reached) / games,
    }
    if per_round:
        count = games if deals is None else deals
        report["rounds"] = [_measure_round(number, count, seed, bot, progress) for number in rounds]
    return report


def _measure_round(
    number: int,
    deals: int,
    seed: str,
    bot: Strategy,
    progress: Callable[[], None] | None = None,
) -> dict[str, object]:
    """Play round ``number`` alone on ``deals`` seeded deals and summarise it."""
    passed = 0
    hands: list[float] = []
    left: list[float] = []
    for i in range(deals):
        engine = BlackjackPiles.new(Config(first_round=number), f"{seed}:{number}:{i}")
        _play(engine, bot, 1)
        result = engine.view(0).results[0]
        passed += result.passed
        hands.append(result.hands)
        left.append(result.left)
        if progress is not None:
            progress()
    rate = passed / deals
    rules = ROUNDS[number - 1]
    return {
        "round": number,
        "piles": rules.piles,
        "cap": rules.cap,
        "stock_in_hand": rules.stock_in_hand,
        "pass_rate": round(rate, 4),
        "pass_rate_se": round(math.sqrt(rate * (1 - rate) / deals), 4),
        "mean_hands": round(statistics.fmean(hands), 2),
        "mean_left": round(statistics.fmean(left), 2),
    }
