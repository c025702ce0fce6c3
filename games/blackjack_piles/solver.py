"""Blackjack Piles with every card known: a bounded search for a round's best score (par).

Theory of operation
-------------------
A round of Blackjack Piles (:mod:`blackdrez.games.blackjack_piles.rules`) is a sequence of decisions
over
a known deck once the stock's order is known: place the top card on a pile, cash 2 to 6 available
cards worth 21, move a top card to an empty pile, or end the round once the stock is empty. Only
the cards' points matter (a Jack is a Ten), so the search works on points: Aces 1, tens 10.

:class:`RoundSearch` is a depth-first branch and bound for the highest round score before the
multiplier, ``hands + bonus`` (the bonus for 1 to 3 cards left). Piles are interchangeable (the
cap is the round's), so a position is its piles as a sorted multiset, the number of cards drawn
and the hands cashed; a position met again with no more hands than before is not searched
again. A branch is cut when even an optimistic count of the hands still possible cannot beat
the best score found: each hand takes at least two cards, and a two-card hand needs an Ace and
a ten, so ``r`` cards left hold at most ``(r + min(aces, tens)) // 3`` more hands. Moves are
tried cashes first (each cash is a hand now), then placements, then moves to an empty pile.

The search stops after ``budget`` positions; the score found is then a lower bound and the
answer says it is not exact. :func:`round_par` solves one round from its start;
:func:`game_par` gives the par of every round a finished game played (each round's deck is in
the game's state). A round's par starts from what the player reached in it (a *floor*: their
line is itself possible), so the search only looks for better lines, which prunes more, and the
par is never below the player's score even when the budget runs out.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import msgspec

from blackdrez.games.blackjack_piles.rules import (
    MAX_HAND,
    MIN_HAND,
    TARGET,
    BlackjackPiles,
    RoundRules,
    card_points,
    round_bonus,
    rules_of,
)

DEFAULT_BUDGET = 20_000
"""Positions per round (about a second of CPU)."""
PAR_BUDGET = 5_000
"""Positions per round when a server computes a finished game's par (in its worker process, off
the event loop): about 0.8 s of CPU for a whole game, and a par 6% higher on average than with
1,000 positions (``benchmarks/par_budgets.py``, docs/solitaire.md)."""

Piles = tuple[tuple[int, ...], ...]
Step = tuple[int, ...]
"""A move of the search: ``(0, pile)`` place, ``(1, stock, *piles)`` cash, ``(2, source,
target)`` move; pile numbers are positions in the sorted piles."""
_PLACE, _CASH, _MOVE = range(3)


class RoundPar(msgspec.Struct, frozen=True, kw_only=True):
    """The best a round allows with every card known: ``hands`` cashed, ``left`` cards left,
    their ``bonus`` and ``score`` (with the round's multiplier); ``exact`` unless the budget ran
    out (the score is then the best found, a lower bound)."""

    round: int
    hands: int
    left: int
    bonus: int
    score: int
    passed: bool
    exact: bool
    nodes: int


class _OutOfBudget(Exception):
    pass


def _makes_21(points: Sequence[int]) -> bool:
    missing = TARGET - sum(points)
    return missing >= 0 and missing % 10 == 0 and missing // 10 <= points.count(1)


class RoundSearch:
    """A branch and bound over one round (module docstring), from any position of it."""

    def __init__(
        self,
        rules: RoundRules,
        stock: Sequence[int],
        budget: int,
        floor: tuple[int, int] | None = None,
    ) -> None:
        """Search a round dealing ``stock`` (points, top first); ``floor``: ``(hands, left)`` at
        the end of a line known to be possible (the search then looks only for better ones)."""
        self.rules = rules
        self.stock = tuple(stock)
        """The points of the cards still to come, top first (the first is face up)."""
        self.budget = budget
        self.nodes = 0
        self.exact = True
        self.best = -1 if floor is None else floor[0] + round_bonus(floor[1])
        self.best_end: tuple[int, int] = (0, 0) if floor is None else floor
        """``(hands, left)`` at the end of the best line."""
        self.best_line: list[Step] = []
        self.path: list[Step] = []
        self.memo: dict[tuple[Piles, int], int] = {}
        n = len(self.stock)
        self.aces_after = [0] * (n + 1)
        self.tens_after = [0] * (n + 1)
        for i in range(n - 1, -1, -1):
            self.aces_after[i] = self.aces_after[i + 1] + (self.stock[i] == 1)
            self.tens_after[i] = self.tens_after[i + 1] + (self.stock[i] == 10)

    def run(self, piles: Sequence[Sequence[int]], hands: int = 0) -> None:
        """Search from ``piles`` (bottom card first) with ``hands`` already cashed."""
        start = tuple(sorted(tuple(pile) for pile in piles))
        try:
            self.search(start, 0, hands)
        except _OutOfBudget:
            self.exact = False

    def end(self, piles: Piles, drawn: int, hands: int) -> None:
        """The round ends here: keep it if it is the best so far."""
        left = sum(len(pile) for pile in piles) + len(self.stock) - drawn
        score = hands + round_bonus(left)
        if score > self.best:
            self.best, self.best_end, self.best_line = score, (hands, left), list(self.path)

    def search(self, piles: Piles, drawn: int, hands: int) -> None:
        key = (piles, drawn)
        if self.memo.get(key, -1) >= hands:
            return
        self.memo[key] = hands
        self.nodes += 1
        if self.nodes > self.budget:
            raise _OutOfBudget
        stock = self.stock
        if drawn == len(stock):
            self.end(piles, drawn, hands)
        on_piles = sum(len(pile) for pile in piles)
        aces = self.aces_after[drawn] + sum(pile.count(1) for pile in piles)
        tens = self.tens_after[drawn] + sum(pile.count(10) for pile in piles)
        rest = on_piles + len(stock) - drawn
        if hands + (rest + min(aces, tens)) // 3 + round_bonus(1) <= self.best:
            return
        moves = self.moves(piles, drawn)
        if not moves:
            self.end(piles, drawn, hands)
            return
        for move in moves:
            self.path.append(move)
            self.search(*self.after(piles, drawn, hands, move))
            self.path.pop()

    def moves(self, piles: Piles, drawn: int) -> list[Step]:
        """Cashes, then placements (on distinct piles), then moves to an empty pile."""
        top = self.stock[drawn] if drawn < len(self.stock) else None
        tops = [(index, pile[-1]) for index, pile in enumerate(piles) if pile]
        sources: list[tuple[int, int]] = list(tops)
        if top is not None and self.rules.stock_in_hand:
            sources.append((-1, top))
        cashes: list[Step] = []
        seen: set[tuple[object, ...]] = set()
        for size in range(min(MAX_HAND, len(sources)), MIN_HAND - 1, -1):
            for combo in itertools.combinations(sources, size):
                if _makes_21([points for _, points in combo]):
                    chosen = [index for index, _ in combo if index >= 0]
                    stock = int(len(chosen) < size)
                    shape = (stock, *sorted(piles[index] for index in chosen))
                    if shape not in seen:
                        seen.add(shape)
                        cashes.append((_CASH, stock, *chosen))
        moves = cashes
        if top is not None:
            cap = self.rules.cap
            done: set[tuple[int, ...]] = set()
            for index, pile in enumerate(piles):
                if (cap is None or len(pile) < cap) and pile not in done:
                    done.add(pile)
                    moves.append((_PLACE, index))
        empty = next((index for index, pile in enumerate(piles) if not pile), None)
        if empty is not None:
            done = set()
            for index, pile in enumerate(piles):
                if len(pile) >= MIN_HAND and pile not in done:
                    done.add(pile)
                    moves.append((_MOVE, index, empty))
        return moves

    def after(self, piles: Piles, drawn: int, hands: int, move: Step) -> tuple[Piles, int, int]:
        """The position after ``move`` (piles sorted again)."""
        changed = list(piles)
        kind = move[0]
        if kind == _PLACE:
            changed[move[1]] = (*piles[move[1]], self.stock[drawn])
            drawn += 1
        elif kind == _CASH:
            for index in move[2:]:
                changed[index] = piles[index][:-1]
            drawn += move[1]
            hands += 1
        else:
            source, target = move[1], move[2]
            changed[target] = (piles[source][-1],)
            changed[source] = piles[source][:-1]
        return tuple(sorted(changed)), drawn, hands


def round_par(
    deck: Sequence[str],
    number: int,
    budget: int = DEFAULT_BUDGET,
    floor: tuple[int, int] | None = None,
) -> RoundPar:
    """The par of round ``number`` dealt from ``deck`` (top first), from its start; ``floor``:
    ``(hands, left)`` the player reached in it, if known."""
    rules = rules_of(number)
    search = RoundSearch(rules, [card_points(card) for card in deck], budget, floor)
    search.run([[] for _ in range(rules.piles)])
    hands, left = search.best_end
    bonus = round_bonus(left)
    return RoundPar(
        round=number,
        hands=hands,
        left=left,
        bonus=bonus,
        score=(hands + bonus) * number,
        passed=hands > left,
        exact=search.exact,
        nodes=search.nodes,
    )


def game_par(engine: BlackjackPiles, budget: int = DEFAULT_BUDGET) -> list[RoundPar]:
    """The par of every round ``engine``'s game has finished (each from its own deck), never
    below the player's score in that round."""
    state = engine.state
    first = state.config.first_round
    return [
        round_par(state.decks[index], first + index, budget, (result.hands, result.left))
        for index, result in enumerate(state.results)
    ]
