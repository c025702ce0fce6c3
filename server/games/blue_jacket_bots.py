"""Reference bots for Blue Jacket: pure functions of the player's view and legal actions.

``heuristic`` ranks the legal actions by a fixed list of priorities (below) and plays the best;
``first`` plays the first legal action that is not resign; ``random`` plays a legal action chosen
by a generator seeded from the view, so it too is a pure function. ``simulate`` plays whole games.

The heuristic's priorities, best first:

1. an Ace from the bottom row to the Aces pile; an interchange;
2. a starting rank into an empty row pile (from a row pile first when the pile it leaves can be
   refilled too, else from the bottom row first);
3. a build from the bottom row (more when it uncovers a useful card);
4. a build or an Ace from a row pile, when starting ranks on the bottom row can refill every
   empty pile of that row, or when no deal will come any more (otherwise the card stays: it is
   just as available in its row, and full rows keep dealing possible);
5. a card off a bottom pile into an empty bottom pile when the card under it is useful, then a
   row card into an empty bottom pile when the emptied pile can be refilled the same way;
6. spreading a tall bottom pile into an empty bottom pile (the next deal covers it anyway);
7. deal;
8. anything else but resign (only when no deal is possible).
"""

from __future__ import annotations

import hashlib
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from server.games.blue_jacket import (
    ACES,
    PILES,
    ROWS,
    STARTERS,
    Action,
    BlueJacket,
    Config,
    Deal,
    Interchange,
    Move,
    Resign,
    View,
    bottom_location,
    next_card,
    row_location,
)
from server.games.cards import rank_of

Strategy = Callable[[View, Sequence[Action]], Action]


class _Board:
    """What the heuristic reads off a view: available cards, wanted cards, empty piles."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.cards: dict[str, list[str]] = {}
        for r in range(ROWS):
            for p in range(PILES):
                self.cards[row_location(r, p)] = view.rows[r][p]
        for i in range(PILES):
            self.cards[bottom_location(i)] = view.bottom[i]
        self.wanted: set[str] = set()
        self.empty = [0] * ROWS
        self.available: list[str] = []
        for r in range(ROWS):
            for pile in view.rows[r]:
                if not pile:
                    self.empty[r] += 1
                elif rank_of(pile[0]) == STARTERS[r]:
                    follow = next_card(pile[-1])
                    if follow is not None:
                        self.wanted.add(follow)
                else:
                    self.available.append(pile[0])
        self.bottom_tops = [pile[-1] for pile in view.bottom if pile]
        self.available.extend(self.bottom_tops)
        self.dealing_over = view.stock_count == 0

    def useful(self, card: str) -> bool:
        """Whether ``card`` could go to a foundation now."""
        rank = rank_of(card)
        if rank == 1 or card in self.wanted:
            return True
        return rank in STARTERS and self.empty[rank - STARTERS[0]] > 0

    def refillable(self, source: str) -> bool:
        """Whether emptying row pile ``source`` costs nothing.

        It does when the stock is empty (no deal to block), or when enough cards of the row's
        starting rank wait on top of bottom piles to fill every empty pile of the row, this one
        included. (Starting ranks in other rows do not count: moving them empties their pile.)
        """
        if self.dealing_over:
            return True
        row = int(source[1]) - 1
        starters = sum(rank_of(c) == STARTERS[row] for c in self.bottom_tops)
        return starters > self.empty[row]


def _priority(board: _Board, action: Action) -> int:
    """How much the heuristic likes ``action`` (higher is better)."""
    if isinstance(action, Interchange):
        return 95
    if isinstance(action, Deal):
        return 20
    if not isinstance(action, Move):
        return -1
    source, target = action.source, action.target
    pile = board.cards[source]
    from_row = source[0] == "r"
    under = pile[-2] if len(pile) >= 2 else None
    uncovers = under is not None and board.useful(under)
    if target == ACES:
        if not from_row:
            return 100
        return 70 if board.refillable(source) else 8
    if target[0] == "r":
        if not board.cards[target]:
            if not from_row:
                return 90
            return 92 if board.refillable(source) else 60
        if not from_row:
            return 85 if uncovers else 80
        if board.refillable(source):
            return 75
        return 10
    if from_row:
        return 45 if board.refillable(source) else 2
    if uncovers:
        return 50
    return 25 if len(pile) >= 3 else 5


def heuristic(view: View, legal: Sequence[Action]) -> Action:
    """The best legal action by the priorities in the module docstring (ties: first listed)."""
    board = _Board(view)
    return max(legal, key=lambda action: _priority(board, action))


def first(view: View, legal: Sequence[Action]) -> Action:
    """The first legal action that is not resign (resign when nothing else is left)."""
    return next((a for a in legal if not isinstance(a, Resign)), legal[0])


def random_play(view: View, legal: Sequence[Action]) -> Action:
    """A uniformly chosen legal action other than resign, seeded from the view (pure)."""
    plays = [a for a in legal if not isinstance(a, Resign)] or list(legal)
    digest = hashlib.sha256(msgspec.json.encode(view)).digest()
    return random.Random(digest).choice(plays)


STRATEGIES: dict[str, Strategy] = {"heuristic": heuristic, "first": first, "random": random_play}


def play(engine: BlueJacket, strategy: Strategy) -> int:
    """Play ``engine`` to the end with ``strategy``; return the number of actions applied."""
    actions = 0
    while not engine.over:
        action = strategy(engine.view(0), engine.legal_actions(0))
        engine.apply(0, action)
        actions += 1
    return actions


def simulate(
    games: int, seed: str, strategy: str = "heuristic", progress_budget: int = 0
) -> dict[str, Any]:
    """Play ``games`` games (seeds ``f"{seed}:{i}"``) with one strategy; return statistics.

    ``progress_budget`` is passed to the engine's :class:`Config` (0, the default, skips the
    progress search, which the bots do not use).
    """
    if games < 1:
        raise ValueError("games must be at least 1")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {sorted(STRATEGIES)}")
    chosen = STRATEGIES[strategy]
    config = Config(progress_budget=progress_budget)
    scores: list[int] = []
    moves: list[int] = []
    wins = 0
    started = time.perf_counter()
    for index in range(games):
        engine = BlueJacket.new(config, f"{seed}:{index}")
        moves.append(play(engine, chosen))
        result = engine.result()
        scores.append(result.score)
        wins += result.won
    elapsed = time.perf_counter() - started
    return {
        "game": BlueJacket.game,
        "strategy": strategy,
        "games": games,
        "wins": wins,
        "win_rate": wins / games,
        "mean_score": statistics.fmean(scores),
        "median_score": statistics.median(scores),
        "best_score": max(scores),
        "mean_moves": statistics.fmean(moves),
        "moves_per_second": sum(moves) / elapsed if elapsed > 0 else None,
        "seconds": elapsed,
    }
