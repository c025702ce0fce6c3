"""The Blackjack Piles expert's fast look-ahead values positions exactly as the plain one does.

The expert's look-ahead (``blackdrez.games.blackjack_piles.expert``) is optimised: the last card
ahead is
valued by the piles' tops and room only, positions are remembered at several levels, and a
decision with one candidate is not looked at. The reference here is the look-ahead as first
written: every position by its full piles, the expectation over the next card of the best
reply, recursively, the potential from the groups of pile tops. On positions from games the
expert plays in rounds 3 to 6, every candidate must get exactly the same value one and two cards
ahead (the same float: the sums run in the same order), and the expert must choose the action
the plain look-ahead values best.
"""

from __future__ import annotations

import itertools

from blackdrez.games.blackjack_piles.expert import (
    CASH_WEIGHT,
    DEEP_FROM_ROUND,
    DEEP_LOOK_AHEAD,
    FULL_PILE_PENALTY,
    LOOK_AHEAD,
    PAIR_WEIGHT,
    Odds,
    PilesExpert,
    _after,
    _Lookahead,
    choose,
    unseen_points,
)
from blackdrez.games.blackjack_piles.rules import (
    MAX_HAND,
    BlackjackPiles,
    Cash,
    Config,
    Move,
    Place,
    RoundRules,
    card_points,
    missing_to_21,
    points_make_21,
)

Piles = tuple[tuple[int, ...], ...]


class _Reference:
    """The plain look-ahead: no shortcut, every position by its piles."""

    def __init__(self, rules: RoundRules, odds: Odds) -> None:
        self.rules = rules
        self.odds = odds
        self.memo: dict[tuple[Piles, int | None, int], float] = {}

    def potential(self, piles: Piles) -> float:
        cap = self.rules.cap
        shape = sorted((pile[-1] if pile else 0, cap is None or len(pile) < cap) for pile in piles)
        tops = [(index, top) for index, (top, _) in enumerate(shape) if top]
        total = []
        for size in range(1, min(MAX_HAND - 1, len(tops)) + 1):
            for group in itertools.combinations(tops, size):
                members = {index for index, _ in group}
                others = [takes for i, (_, takes) in enumerate(shape) if i not in members]
                if not self.rules.stock_in_hand and not any(others):
                    continue
                needed, pairs = missing_to_21(tuple(sorted(value for _, value in group)))
                pair = max((self.odds.pair[missing] for missing in pairs), default=0.0)
                total.append(sum(self.odds.single[v] for v in needed) + PAIR_WEIGHT * pair)
        full = sum(not takes for _, takes in shape)
        return -FULL_PILE_PENALTY * full + sum(total)

    def replies(self, piles: Piles, top: int) -> list[tuple[int, Piles, bool]]:
        sources = [(index, pile[-1]) for index, pile in enumerate(piles) if pile]
        if self.rules.stock_in_hand:
            sources.append((-1, top))
        hands = []
        for size in range(2, min(MAX_HAND, len(sources)) + 1):
            for combo in itertools.combinations(sources, size):
                if points_make_21([points for _, points in combo]):
                    chosen = [index for index, _ in combo if index >= 0]
                    after = tuple(
                        sorted(pile[:-1] if i in chosen else pile for i, pile in enumerate(piles))
                    )
                    hands.append((size, after, len(chosen) == size))
        if hands:
            return hands
        cap = self.rules.cap
        return [
            (0, tuple(sorted((*piles[:i], (*pile, top), *piles[i + 1 :]))), False)
            for i, pile in enumerate(piles)
            if cap is None or len(pile) < cap
        ]

    def value(self, piles: Piles, top: int | None, cards: int) -> float:
        key = (piles, top, cards)
        if key not in self.memo:
            if top is None and cards == 0:
                value = self.potential(piles)
            elif top is None:
                value = sum(
                    chance * self.value(piles, points, cards - 1)
                    for points, chance in enumerate(self.odds.single)
                    if chance > 0
                )
            else:
                value = max(
                    (
                        CASH_WEIGHT * gain + self.value(after, top if keeps else None, cards)
                        for gain, after, keeps in self.replies(piles, top)
                    ),
                    default=-CASH_WEIGHT * 10,
                )
            self.memo[key] = value
        return self.memo[key]


def test_the_fast_look_ahead_values_every_candidate_as_the_plain_one_does() -> None:
    compared = 0
    for first in (3, 4, 5, 6):
        engine = BlackjackPiles.new(Config(first_round=first), f"lookahead:{first}")
        expert = PilesExpert()
        depth = DEEP_LOOK_AHEAD if first >= DEEP_FROM_ROUND else LOOK_AHEAD
        decision = 0
        while not engine.over and engine.view(0).round == first:
            view, legal = engine.view(0), engine.legal_actions(0)
            decision += 1
            candidates = [a for a in legal if isinstance(a, Cash)] or [
                a for a in legal if isinstance(a, Place | Move)
            ]
            if decision % 5 == 0 and len(candidates) > 1:
                odds = Odds(unseen_points(view, expert.cashed))
                fast = _Lookahead(view.rules, odds)
                plain = _Reference(view.rules, odds)
                piles = [[card_points(card) for card in pile] for pile in view.piles]
                top = card_points(view.stock_top) if view.stock_top else None
                values = []
                for action in candidates:
                    after = _after(piles, top, action)
                    consumed = isinstance(action, Place) or (
                        isinstance(action, Cash) and action.stock
                    )
                    left = view.stock_count - 1 if consumed else view.stock_count
                    shown = None if consumed else top
                    for cards in {max(min(ahead, left), 0) for ahead in (1, DEEP_LOOK_AHEAD)}:
                        assert fast.value(after, shown, cards) == plain.value(after, shown, cards)
                    removed = len(action.piles) + action.stock if isinstance(action, Cash) else 0
                    ahead = plain.value(after, shown, max(min(depth, left), 0))
                    values.append(CASH_WEIGHT * removed + ahead)
                best = candidates[values.index(max(values))]
                assert choose(view, legal, expert.cashed) == best
                compared += 1
            engine.apply(0, expert(view, legal))
    assert compared >= 20
