"""Reference bots for Blue Jacket: pure functions of the player's view and legal actions.

Strategies (``STRATEGIES``):

* ``heuristic`` (the reference): a bounded look-ahead over the open cards (:func:`look_ahead`),
  falling back to ``greedy`` when the look-ahead finds nothing that raises the score;
* ``greedy``: the best legal action by the fixed priorities below, no search;
* ``first``: the first legal action that is not resign;
* ``random``: a legal action other than resign, from a generator seeded by the view (so it too
  is a pure function);
* ``expert``: imagines the stock and solves (:mod:`blackdrez.games.blue_jacket.expert`); it keeps
  the plan of the current phase between moves.

The look-ahead sees what the player sees: every card but the stock. It applies the *safe*
foundation plays (those that take nothing another card could want) and searches the others and
the moves into empty bottom piles, depth first, each position once, for the best score; while
deals remain, positions that keep every row pile filled (so the next deal can come) come first.

The greedy priorities, best first:

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

``simulate`` plays whole games with one strategy and reports statistics.
"""

from __future__ import annotations

import functools
import hashlib
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from blackdrez.games.blue_jacket.expert import ExpertBot
from blackdrez.games.blue_jacket.rules import (
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
from blackdrez.games.cards import rank_of, standard_deck
from blackdrez.games.stats import wilson

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


# Looking ahead: every card but the stock is open, so the bot searches the open position.

Spot = tuple[str, int]
"""A pile in the search: ``("r", 0..23)`` row piles row by row, ``("b", 0..7)``, ``("a", 0)``."""
Play = tuple[str, Spot, Spot]
"""``("move", source, target)`` or ``("swap", a, b)``."""
Position = tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...], int]
"""Row piles (24), bottom piles (8) and the number of cards on the Aces pile."""

SEARCH_BUDGET = 100
"""Plays the look-ahead may try for one decision (100: about 0.2 s a game, 69% won; 300:
about twice as slow, 71% won; 30: 65% won)."""
FULL_ROWS_BONUS = 1000
"""While deals remain, a position whose row piles all hold a card (so the deal can come) beats
any position that blocks it."""


def _position(view: View) -> Position:
    rows = tuple(tuple(pile) for row in view.rows for pile in row)
    return rows, tuple(tuple(pile) for pile in view.bottom), len(view.aces)


_RANK = {card: rank_of(card) for card in standard_deck()}
_NEXT = {card: next_card(card) for card in standard_deck()}
_START = [STARTERS[index // PILES] for index in range(ROWS * PILES)]
"""Lookup tables: the search spends its time in :func:`_plays`."""


def _plays(position: Position, dealing: bool) -> tuple[list[Play], list[Play]]:
    """The plays of an open position: ``(safe, choices)``.

    A play is safe when it puts a card on a foundation without taking a place another card
    could want: an Ace, an interchange, a build or a starting rank when every available copy or
    starter has its own target. While deals remain (``dealing``), a play that empties a row pile
    is not safe (it blocks the deal until refilled). The choices are the other foundation plays
    and the moves into an empty bottom pile.
    """
    rows, bottom, _ = position
    wanted: dict[str, list[int]] = {}
    empties: list[list[int]] = [[] for _ in range(ROWS)]
    sources: list[tuple[Spot, str]] = []
    misplaced: list[tuple[Spot, str]] = []
    for index, pile in enumerate(rows):
        if not pile:
            empties[index // PILES].append(index)
        elif _RANK[pile[0]] == _START[index]:
            follow = _NEXT[pile[-1]]
            if follow is not None:
                wanted.setdefault(follow, []).append(index)
        else:
            misplaced.append((("r", index), pile[0]))
    free = None
    for index, pile in enumerate(bottom):
        if pile:
            sources.append((("b", index), pile[-1]))
        elif free is None:
            free = index
    sources += misplaced
    copies: dict[str, int] = {}
    starters = [0] * 14
    for _, card in sources:
        copies[card] = copies.get(card, 0) + 1
        starters[_RANK[card]] += 1
    safe: list[Play] = []
    choices: list[Play] = []
    for spot, card in sources:
        rank = _RANK[card]
        unsafe = dealing and spot[0] == "r"
        if rank == 1:
            (choices if unsafe else safe).append(("move", spot, ("a", 0)))
        targets = wanted.get(card)
        if targets:
            group = safe if copies[card] <= len(targets) and not unsafe else choices
            group.append(("move", spot, ("r", targets[0])))
        if rank in STARTERS and empties[rank - STARTERS[0]]:
            holes = empties[rank - STARTERS[0]]
            group = safe if starters[rank] <= len(holes) and not unsafe else choices
            group.append(("move", spot, ("r", holes[0])))
        if free is not None and (spot[0] == "r" or len(bottom[spot[1]]) >= 2):
            choices.append(("move", spot, ("b", free)))
    for a, card_a in misplaced:
        for b, card_b in misplaced:
            if a < b and _RANK[card_a] == _START[b[1]] and _RANK[card_b] == _START[a[1]]:
                safe.append(("swap", a, b))
    return safe, choices


def _after(position: Position, play: Play) -> Position:
    rows, bottom, aces = list(position[0]), list(position[1]), position[2]
    kind, a, b = play
    if kind == "swap":
        rows[a[1]], rows[b[1]] = rows[b[1]], rows[a[1]]
        return tuple(rows), tuple(bottom), aces
    piles = rows if a[0] == "r" else bottom
    card = piles[a[1]][-1]
    piles[a[1]] = piles[a[1]][:-1]
    if b[0] == "a":
        aces += 1
    else:
        goal = rows if b[0] == "r" else bottom
        goal[b[1]] = (*goal[b[1]], card)
    return tuple(rows), tuple(bottom), aces


class _Search:
    """Best reachable value of open positions, depth first, each position once."""

    def __init__(self, budget: int, dealing: bool) -> None:
        self.budget = budget
        self.dealing = dealing
        self.memo: dict[tuple[Any, ...], int] = {}

    def value(self, position: Position) -> int:
        """The score, plus a bonus while deals remain and every row pile holds a card."""
        rows, _, aces = position
        score = aces + sum(
            len(pile) for i, pile in enumerate(rows) if pile and _RANK[pile[0]] == _START[i]
        )
        return score + (FULL_ROWS_BONUS if self.dealing and all(rows) else 0)

    def settled(self, position: Position) -> Position:
        """``position`` after every safe play, one at a time."""
        while True:
            safe, _ = _plays(position, self.dealing)
            if not safe:
                return position
            position = _after(position, safe[0])

    def best(self, position: Position) -> int:
        """The best value reachable from ``position`` (within the budget)."""
        rows, bottom, _ = position
        key = (
            *(tuple(sorted(rows[r * PILES : (r + 1) * PILES])) for r in range(ROWS)),
            tuple(sorted(bottom)),
        )
        if key in self.memo:
            return self.memo[key]
        value = self.value(position)
        for play in _plays(position, self.dealing)[1]:
            if self.budget <= 0:
                break
            self.budget -= 1
            value = max(value, self.best(self.settled(_after(position, play))))
        self.memo[key] = value
        return value


def _action(play: Play) -> Action:
    def name(spot: Spot) -> str:
        kind, index = spot
        if kind == "r":
            return row_location(index // PILES, index % PILES)
        return bottom_location(index) if kind == "b" else ACES

    kind, a, b = play
    return Interchange(name(a), name(b)) if kind == "swap" else Move(name(a), name(b))


def look_ahead(view: View, budget: int = SEARCH_BUDGET) -> Action | None:
    """A safe foundation play, else the choice leading to the best value the search finds
    (see :class:`_Search`); ``None`` when no choice beats the position as it is."""
    if view.over:
        return None
    search = _Search(budget, dealing=view.stock_count > 0)
    position = _position(view)
    safe, choices = _plays(position, search.dealing)
    if safe:
        return _action(safe[0])
    best, chosen = search.value(position), None
    for play in choices:
        value = search.best(search.settled(_after(position, play)))
        if value > best:
            best, chosen = value, play
    return None if chosen is None else _action(chosen)


def greedy(view: View, legal: Sequence[Action]) -> Action:
    """The best legal action by the priorities in the module docstring (ties: first listed)."""
    board = _Board(view)
    return max(legal, key=lambda action: _priority(board, action))


def heuristic(view: View, legal: Sequence[Action], budget: int = SEARCH_BUDGET) -> Action:
    """The look-ahead's play when it finds one that raises the score, else :func:`greedy`'s."""
    planned = look_ahead(view, budget)
    if planned is not None and planned in legal:
        return planned
    return greedy(view, legal)


def first(view: View, legal: Sequence[Action]) -> Action:
    """The first legal action that is not resign (resign when nothing else is left)."""
    return next((a for a in legal if not isinstance(a, Resign)), legal[0])


def random_play(view: View, legal: Sequence[Action]) -> Action:
    """A uniformly chosen legal action other than resign, seeded from the view (pure)."""
    plays: list[Action] = [a for a in legal if not isinstance(a, Resign)] or list(legal)
    digest = hashlib.sha256(msgspec.json.encode(view)).digest()
    return random.Random(digest).choice(plays)


STRATEGIES: dict[str, Strategy] = {
    "heuristic": heuristic,
    "greedy": greedy,
    "first": first,
    "random": random_play,
    "expert": ExpertBot(),
}


def play(engine: BlueJacket, strategy: Strategy) -> int:
    """Play ``engine`` to the end with ``strategy``; return the number of actions applied."""
    actions = 0
    while not engine.over:
        action = strategy(engine.view(0), engine.legal_actions(0))
        engine.apply(0, action)
        actions += 1
    return actions


def simulate(
    games: int,
    seed: str,
    strategy: str = "heuristic",
    search_budget: int = SEARCH_BUDGET,
    progress_budget: int = 0,
    progress: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Play ``games`` games (seeds ``f"{seed}:{i}"``) with one strategy; return statistics.
    ``progress``, if given, is called after each game.

    ``search_budget`` sets the ``heuristic`` look-ahead's budget (more plays slower and a little
    better). ``progress_budget`` is passed to the engine's :class:`Config` (0, the default,
    skips the progress search, which the bots do not use).
    """
    if games < 1:
        raise ValueError("games must be at least 1")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {sorted(STRATEGIES)}")
    if search_budget < 0:
        raise ValueError("search_budget must not be negative")
    chosen: Strategy = STRATEGIES[strategy]
    if strategy == "heuristic":
        chosen = functools.partial(heuristic, budget=search_budget)
    elif strategy == "expert":
        chosen = ExpertBot()

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
        if progress is not None:
            progress()
    elapsed = time.perf_counter() - started
    return {
        "game": BlueJacket.game,
        "strategy": strategy,
        "search_budget": search_budget if strategy == "heuristic" else None,
        "games": games,
        "wins": wins,
        "win_rate": wins / games,
        "win_rate_ci95": list(wilson(wins, games)),
        "mean_score": statistics.fmean(scores),
        "median_score": statistics.median(scores),
        "best_score": max(scores),
        "mean_moves": statistics.fmean(moves),
        "moves_per_second": sum(moves) / elapsed if elapsed > 0 else None,
        "seconds": elapsed,
    }
