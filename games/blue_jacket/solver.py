"""A Blue Jacket solver: perfect-information search (it sees the stock) with a node budget.

Theory of operation
-------------------
:func:`solve` takes a game (an engine, whose state holds the stock order) and answers one of:

* ``winnable``: with a list of engine actions that replays to a win;
* ``not_winnable``: the search was exhausted without a win;
* ``unknown``: the node budget ran out first.

It is a depth-first search over positions. A position is the 24 row piles (each coded as empty,
one misplaced card, or a foundation by its top card), the eight bottom piles, how many deals
were made and how many Aces are home. A *node* is a position the search expands (tries moves
from); the budget counts nodes. The techniques, each one a switch of :class:`Techniques` so that
the tests can check that each keeps every answer (and a measurement can turn it off):

* **Transpositions.** Every expanded position is remembered by a canonical key: each row's piles
  as an unordered multiset (no rule cares where a pile sits in its row), the bottom piles in
  order while deals remain (pile ``i`` gets the ``i``-th card of a deal) and as a multiset after
  the last deal. Moves only ever raise the score or park a card for good, so positions never
  repeat along a line: a position met again has already failed.
* **Merged moves.** Moves that lead to the same canonical position are generated once: two
  identical row piles as sources or targets, and, after the last deal, the empty bottom piles.
* **Starter-supply cut.** While deals remain, every empty row pile must be refilled by its row's
  starting rank before the next deal, and only starters on the bottom row (face up or buried)
  reduce the number of empty piles: a misplaced starter moved in from another row leaves a hole
  there. So for every set ``S`` of rows, the holes in ``S`` cannot exceed the starters of ``S``'s
  rows on the bottom row plus those misplaced in rows outside ``S``. When that fails, no deal can
  ever come again and the stock can never be won: the branch is lost.
* **Safe moves.** Some foundation moves are played at once, without branching, because any win
  from the position is also a win after them (:meth:`Search.safe_move` gives the conditions and
  why): an Ace, a build whose copies still off the foundations do not outnumber its targets, a
  starting rank into an empty row pile when every starting rank of that row still to come has
  a hole waiting. While deals remain they come only from bottom piles of two or more cards (a
  lone bottom card is a placeholder) and only with at most one deal left. Two relaxations that
  are not proved but make the search several times faster (*likely safe moves*: count only the
  available copies, and allow them earlier) are played too; when the search then finds no win,
  it searches again without them, so ``not_winnable`` is always proved.
* **Parks then use.** Moving a card to an empty bottom pile (*parking* it) only ever matters for
  the card it uncovers, or for where the next deal covers it. So a park must be followed at once
  by a move of the uncovered card (home, or parked in turn), or else only by more parks and the
  deal. Any winning line can be reordered into that shape (delaying a park frees a pile for
  longer and changes nothing else), so nothing winnable is lost; the position records which
  pile is owed a move (the *focus*).
* **Macro moves.** A misplaced row card goes to an empty bottom pile only to make room for a
  starting rank of its row, which then fills the hole at once (one move in the search, two
  actions in the answer). Emptying it earlier than that only costs a bottom pile.
* **Restarts.** The first run tries moves in a fixed order (foundation moves first, then the
  deal, then parks); when it spends its share of the budget, later runs shuffle the order of the
  moves (from a generator seeded by the run number, so the result is deterministic) with
  doubling shares. Positions proved lost (fully searched) stay known across runs, so an
  exhaustive search still ends.

A position counts as won when no card is left off the foundations (for a full game: score 104).
:func:`best_score` searches for the highest reachable score instead (branch and bound: a branch
whose stock can never be dealt again cannot score more than the cards already out).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import msgspec

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
    State,
    bottom_location,
    row_location,
)
from blackdrez.games.blue_jacket.solutions import BestScore, DealResult, Outcome, Solution
from blackdrez.games.cards import standard_deck
from blackdrez.games.stats import percentile, wilson

DEFAULT_BUDGET = 200_000
"""Nodes for one deal: enough to decide nearly every deal (see docs/solitaire.md)."""
PAR_BUDGET = 1_000
"""Nodes (for the win, then as many for the best score) when a server computes a finished
deal's par (in its worker process, off the event loop); it is exact for about nine deals in ten
(docs/solitaire.md)."""
FIRST_RUN_SHARE = 4_000
"""Nodes of the first, unshuffled run; each later run may spend twice as many as the one before."""

_NAMES = standard_deck()
_INDEX = {name: index for index, name in enumerate(_NAMES)}
_RANK = [index % 13 + 1 for index in range(52)]
_NEXT = [index + 3 if _RANK[index] + 3 <= 13 else -1 for index in range(52)]
_STARTER_ROW = [STARTERS.index(_RANK[c]) if _RANK[c] in STARTERS else -1 for c in range(52)]
"""The row a card starts (0-2), or -1 when it is not a starting rank."""
_FOUNDATION = 64
"""Row pile codes: 0 empty, ``1 + card`` a misplaced card, ``64 + top`` a foundation."""
_HEIGHT = [0] * _FOUNDATION + [(rank - 2) // 3 + 1 if rank >= 2 else 0 for rank in _RANK]
"""Cards on a foundation row pile, by its code."""
_HOLDS = [
    frozenset(_FOUNDATION + top for top in range(card, card + 13 - _RANK[card] + 1, 3))
    for card in range(52)
]
"""The codes of the foundation row piles that hold ``card`` (same suit, its rank or above)."""
_FOLLOW = [-1] * _FOUNDATION + _NEXT
"""The card that builds on a row pile, by its code (-1: none)."""
_NO_FOCUS = -1
_PRE_DEAL = PILES
"""Focus values: none, a bottom pile index (its top must move next), or "only parks and deal"."""

# Moves are tuples ``(kind, ...)``. A source below PILES is a bottom pile, ``PILES + i`` is row
# pile ``i``; a home target is a row pile index or _TO_ACES.
_HOME, _PARK, _MACRO, _SWAP, _DEAL = range(5)
_TO_ACES = -1


@dataclass(frozen=True)
class Techniques:
    """Which search techniques are on (all by default; the benchmark turns them off one by one)."""

    transpositions: bool = True
    merge: bool = True
    cut: bool = True
    safe_moves: bool = True
    likely_safe_moves: bool = True
    """Also moves that are safe in practice but not proved (see :meth:`Search.safe_move`)."""
    focus: bool = True
    macros: bool = True
    restarts: bool = True


ALL = Techniques()
"""Every technique: the default."""
PROVED = replace(ALL, likely_safe_moves=False)
"""Only the reductions proved to keep every win (and the best score)."""


class _OutOfBudget(Exception):
    pass


Position = tuple[tuple[int, ...], tuple[tuple[int, ...], ...], int, int, int]
"""(row piles, bottom piles, deals made, Aces home, focus)."""
Step = tuple[int, ...]
"""A move of the search (see the ``_HOME`` .. ``_DEAL`` kinds)."""


def _row_code(pile: Sequence[str], row: int) -> int:
    if not pile:
        return 0
    if _RANK[_INDEX[pile[0]]] == STARTERS[row]:
        return _FOUNDATION + _INDEX[pile[-1]]
    return 1 + _INDEX[pile[0]]


def _score(position: Position) -> int:
    return position[3] + sum(_HEIGHT[code] for code in position[0])


class Search:
    """One search: the problem (start position, the deals to come) and its memory."""

    def __init__(
        self,
        rows: Sequence[Sequence[Sequence[str]]],
        bottom: Sequence[Sequence[str]],
        aces: int,
        stock: Sequence[str],
        budget: int,
        techniques: Techniques = ALL,
        maximize: bool = False,
    ) -> None:
        self.rows, self.bottom, self.aces, self.stock = rows, bottom, aces, stock
        """The problem as given (the expert solves it again from other positions)."""
        codes = tuple(_row_code(pile, r) for r in range(ROWS) for pile in rows[r])
        piles = tuple(tuple(_INDEX[card] for card in pile) for pile in bottom)
        self.start: Position = (codes, piles, 0, aces, _NO_FOCUS)
        cards = [_INDEX[card] for card in stock]
        self.deals = tuple(tuple(cards[i : i + PILES]) for i in range(0, len(cards), PILES))
        self.last_deal = len(self.deals)
        self.stock_left = [len(cards) - PILES * dealt for dealt in range(self.last_deal + 1)]
        off = sum(len(pile) for pile in piles) + sum(1 for c in codes if 0 < c < _FOUNDATION)
        self.total = _score(self.start) + off + len(cards)
        self.in_game = [0] * 52
        """Copies of each card in the game (two in a full game)."""
        for name in [card for row in rows for pile in row for card in pile]:
            self.in_game[_INDEX[name]] += 1
        for card in [*(c for pile in piles for c in pile), *cards]:
            self.in_game[card] += 1
        """Cards in the game: the score of a win."""
        self.budget = budget
        self.t = techniques
        self.maximize = maximize
        self.spent = 0
        self.nodes = 0
        self.limit = budget
        self.failed: set[object] = set()
        self.path: list[Step] = []
        self.best_line: list[Step] = []
        self.best = _score(self.start)
        self.rng: random.Random | None = None
        self.rows_cache: dict[tuple[int, ...], tuple] = {}

    def again(self, maximize: bool = False) -> Search:
        """A fresh search of the same problem (same budget and techniques)."""
        return Search(self.rows, self.bottom, self.aces, self.stock, self.budget, self.t, maximize)

    # Positions ---------------------------------------------------------------------------

    def key(self, p: Position) -> object:
        """The canonical key of a position (see the module docstring)."""
        if not self.t.transpositions:
            return p
        rows, bottom, dealt, _, focus = p
        piles = tuple(sorted(bottom)) if dealt == self.last_deal else bottom
        return (
            tuple(sorted(rows[0:8])),
            tuple(sorted(rows[8:16])),
            tuple(sorted(rows[16:24])),
            piles,
            dealt,
            focus,
        )

    def rows_info(self, rows: tuple[int, ...]) -> tuple:
        """What the moves need to know about the row piles, cached (parks leave rows alone):
        ``(wanted, holes, need, misplaced per row, misplaced, targets, cross)``.

        ``wanted`` maps a card to the foundations it builds on and ``holes`` lists each row's
        empty piles (only the first of each when merging); ``need`` counts the holes of each
        row; ``misplaced`` lists ``(index, card)``, identical piles of a row merged; ``targets``
        counts the foundations waiting for each card;
        ``cross[r][t]`` the starting ranks of row ``t`` misplaced in row ``r``.
        """
        info = self.rows_cache.get(rows)
        if info is not None:
            return info
        merge = self.t.merge
        wanted: dict[int, list[int]] = {}
        targets: dict[int, int] = {}
        holes: list[list[int]] = [[], [], []]
        misplaced_in_row = [0, 0, 0]
        misplaced: list[tuple[int, int]] = []
        cross = [[0, 0, 0], [0, 0, 0], [0, 0, 0]]
        for index, code in enumerate(rows):
            if code >= _FOUNDATION:
                follow = _FOLLOW[code]
                if follow < 0:
                    continue
                if follow in targets:
                    targets[follow] += 1
                    if not merge:
                        wanted[follow].append(index)
                else:
                    targets[follow] = 1
                    wanted[follow] = [index]
            elif code:
                card = code - 1
                row = index >> 3
                misplaced_in_row[row] += 1
                starts = _STARTER_ROW[card]
                if starts >= 0:
                    cross[row][starts] += 1
                if not merge or code not in rows[index & ~7 : index]:
                    misplaced.append((index, card))
            else:
                holes[index >> 3].append(index)
        need = [len(holes[0]), len(holes[1]), len(holes[2])]
        if merge:
            holes = [h[:1] for h in holes]
        info = (wanted, holes, need, misplaced_in_row, misplaced, targets, cross)
        if len(self.rows_cache) > 50_000:
            self.rows_cache.clear()
        self.rows_cache[rows] = info
        return info

    @staticmethod
    def blocked(bottom: tuple[tuple[int, ...], ...], need: list[int], cross) -> bool:
        """The starter-supply cut (module docstring): no deal can ever come again."""
        supply = [0, 0, 0, 0]  # a card that starts no row (-1) counts in the spare last slot
        for pile in bottom:
            for card in pile:
                supply[_STARTER_ROW[card]] += 1
        for rows_set in range(1, 8):
            holes = have = 0
            for row in range(3):
                if rows_set >> row & 1:
                    holes += need[row]
                    have += supply[row]
                    for other in range(3):
                        if not rows_set >> other & 1:
                            have += cross[other][row]
            if holes > have:
                return True
        return False

    def safe_move(self, p: Position, info: tuple) -> Step | None:
        """A foundation move that loses no win, or ``None``.

        Proved safe: an Ace; a build when the copies of the card not yet on a foundation do
        not outnumber the piles waiting for it (the copies are the same card, so every one has
        a target and the order changes nothing but which source is freed first); a starting
        rank into an empty pile of a row with no misplaced card (every starting rank of that
        row still to come then has a hole of its own, so none competes for this one). Sources:
        after the last deal any available card; before it only the top of a bottom pile of two
        or more cards (taking a row card home leaves a hole that blocks the deal, and a lone
        bottom card is a placeholder: a card dealt onto it can be parked later, one dealt onto
        an empty pile cannot), and only while at most one deal remains (the card's one other
        use is then as a placeholder for the last deal, and after it a lone card is as free as
        a parked one).

        ``likely_safe_moves`` adds two relaxations that are safe in practice but not proved.
        Builds count only the *available* copies: a buried copy might be better placed first,
        keeping the available one where it is. And sources qualify with two or more deals
        left: a card parked as a placeholder then lets the card dealt onto it be parked in
        turn, choosing which card of the following deal covers it. They make the search several
        times faster, so :func:`solve_position` plays them and checks a loss found that way
        again without them.
        """
        rows, bottom, dealt, _, _ = p
        wanted, holes, _, misplaced_in_row, misplaced, targets, _ = info
        likely = self.t.likely_safe_moves
        post = dealt == self.last_deal
        if dealt < self.last_deal - 1 and not likely:
            return None
        least = 1 if post else 2
        tops = [pile[-1] if pile else -1 for pile in bottom]
        sources = [(j, tops[j]) for j, pile in enumerate(bottom) if len(pile) >= least]
        if post:
            sources += [(PILES + index, card) for index, card in misplaced]
        for source, card in sources:
            if _RANK[card] == 1:
                return (_HOME, source, _TO_ACES)
            if card in wanted:
                if likely:
                    copies = tops.count(card) + rows.count(card + 1)
                else:
                    copies = self.unplaced(rows, card)
                if copies <= targets[card]:
                    return (_HOME, source, wanted[card][0])
            row = _STARTER_ROW[card]
            if row >= 0 and holes[row] and not misplaced_in_row[row]:
                return (_HOME, source, holes[row][0])
        return None

    def unplaced(self, rows: tuple[int, ...], card: int) -> int:
        """How many copies of ``card`` in the game are not on a foundation yet."""
        start = _STARTER_ROW[card - (_RANK[card] - 2) // 3 * 3] * PILES
        home = sum(1 for code in rows[start : start + PILES] if code in _HOLDS[card])
        return self.in_game[card] - home

    def expand(self, p: Position) -> tuple[Step | None, list[Step], int]:
        """``(safe move, moves, state)``: ``state`` 1 won, -1 blocked (no deal can come again,
        ``moves`` still lists what can be played), 0 otherwise. A safe move comes alone."""
        rows, bottom, dealt, _, focus = p
        t = self.t
        info = self.rows_info(rows)
        wanted, holes, need, _, misplaced, _, cross = info
        post = dealt == self.last_deal
        if post and not misplaced and not any(bottom):
            return None, [], 1
        if t.safe_moves:
            safe = self.safe_move(p, info)
            if safe is not None:
                return safe, [], 0
        state = 0
        if (
            not post
            and t.cut
            and (need[0] or need[1] or need[2])
            and self.blocked(bottom, need, cross)
        ):
            if not self.maximize:
                return None, [], -1
            state = -1
        free = [j for j in range(PILES) if not bottom[j]]
        if post and t.merge:
            free = free[:1]
        can_deal = not post and not (need[0] or need[1] or need[2])
        if focus == _PRE_DEAL:
            return None, self.pre_deal(bottom, free, can_deal, -1), state
        focused = focus != _NO_FOCUS
        homes: list[Step] = []
        macros: list[Step] = []
        parks: list[Step] = []
        for j in (focus,) if focused else range(PILES):
            pile = bottom[j]
            if not pile:
                continue
            card = pile[-1]
            if _RANK[card] == 1:
                homes.append((_HOME, j, _TO_ACES))
            for target in wanted.get(card, ()):
                homes.append((_HOME, j, target))
            row = _STARTER_ROW[card]
            if row >= 0:
                if need[row]:
                    homes.extend((_HOME, j, hole) for hole in holes[row])
                elif free and t.macros:
                    macros.extend(self.macros(misplaced, row, free, j))
            if len(pile) >= 2:
                parks.extend((_PARK, j, f) for f in free)
        rest: list[Step] = []
        if not focused:
            for index, card in misplaced:
                source = PILES + index
                row = _STARTER_ROW[card]
                if row < 0:
                    continue
                if need[row]:
                    rest.extend((_HOME, source, hole) for hole in holes[row])
                elif free and t.macros:
                    macros.extend(self.macros(misplaced, row, free, source))
                homes.extend(
                    (_SWAP, index, other)
                    for other, other_card in misplaced
                    if other >> 3 == row
                    and _STARTER_ROW[other_card] == index >> 3
                    and index < other
                )
            for index, card in misplaced:
                source = PILES + index
                if _RANK[card] == 1:
                    rest.append((_HOME, source, _TO_ACES))
                for target in wanted.get(card, ()):
                    rest.append((_HOME, source, target))
                if not t.macros:
                    rest.extend((_HOME, source, -2 - f) for f in free)
        moves = homes + macros + rest
        if can_deal:
            moves.append((_DEAL,))
        moves += parks
        if focused and not post:
            moves += self.pre_deal(bottom, free, False, focus)
        return None, moves, state

    @staticmethod
    def macros(misplaced, row: int, free: list[int], source: int) -> Iterator[Step]:
        """Park a misplaced card of ``row`` and put the starter at ``source`` in its place."""
        done: set[int] = set()
        for index, card in misplaced:
            if index >> 3 == row and card not in done:
                done.add(card)
                for f in free:
                    yield (_MACRO, index, f, source)

    @staticmethod
    def pre_deal(bottom, free: list[int], can_deal: bool, skip: int) -> list[Step]:
        """Parks that only change what the next deal covers (from piles other than ``skip``),
        then the deal itself when ``can_deal``."""
        moves: list[Step] = [
            (_PARK, j, f, _PRE_DEAL)
            for j in range(PILES)
            if j != skip and len(bottom[j]) >= 2
            for f in free
        ]
        if can_deal:
            moves.append((_DEAL,))
        return moves

    def apply(self, p: Position, move: Step) -> Position:
        """The position after ``move``."""
        rows, bottom, dealt, aces, focus = p
        kind = move[0]
        if kind == _HOME:
            source, target = move[1], move[2]
            codes = list(rows)
            piles = bottom
            if source < PILES:
                card = bottom[source][-1]
                piles = (*bottom[:source], bottom[source][:-1], *bottom[source + 1 :])
            else:
                card = rows[source - PILES] - 1
                codes[source - PILES] = 0
            if target == _TO_ACES:
                aces += 1
            elif target >= 0:
                codes[target] = _FOUNDATION + card
            else:  # to an empty bottom pile (only with macros off)
                f = -2 - target
                piles = (*piles[:f], (card,), *piles[f + 1 :])
            return tuple(codes), piles, dealt, aces, _NO_FOCUS
        if kind == _PARK:
            j, f = move[1], move[2]
            stacks = list(bottom)
            pile = stacks[j]
            stacks[j] = pile[:-1]
            stacks[f] = (pile[-1],)
            if not self.t.focus:
                focus = _NO_FOCUS
            elif len(move) > 3 or focus == _PRE_DEAL:
                focus = _PRE_DEAL
            else:
                focus = j
            return rows, tuple(stacks), dealt, aces, focus
        if kind == _DEAL:
            stacks = list(bottom)
            for j, card in enumerate(self.deals[dealt]):
                stacks[j] = (*stacks[j], card)
            return rows, tuple(stacks), dealt + 1, aces, _NO_FOCUS
        if kind == _SWAP:
            a, b = move[1], move[2]
            codes = list(rows)
            codes[a], codes[b] = _FOUNDATION + rows[b] - 1, _FOUNDATION + rows[a] - 1
            return tuple(codes), bottom, dealt, aces, _NO_FOCUS
        index, f, source = move[1], move[2], move[3]
        codes = list(rows)
        stacks = list(bottom)
        stacks[f] = (codes[index] - 1,)
        if source < PILES:
            card = stacks[source][-1]
            stacks[source] = stacks[source][:-1]
        else:
            card = codes[source - PILES] - 1
            codes[source - PILES] = 0
        codes[index] = _FOUNDATION + card
        return tuple(codes), tuple(stacks), dealt, aces, _NO_FOCUS

    # The search --------------------------------------------------------------------------

    def search(self, p: Position) -> bool:
        """Whether a win (or, maximizing, a better score) is reachable from ``p``.

        ``path`` holds the moves from the start to ``p``: the winning line when this returns
        ``True``. Every position searched in full without success goes into ``failed``, under
        its key and, when safe moves were played from it, under the key of where they led.
        """
        entry = self.key(p)
        if entry in self.failed:
            return False
        path = self.path
        depth = len(path)
        while True:
            safe, moves, state = self.expand(p)
            if safe is None:
                break
            path.append(safe)
            p = self.apply(p, safe)
        key = self.key(p) if len(path) > depth else entry
        if key not in self.failed:
            if self.maximize:
                score = _score(p)
                if score > self.best:
                    self.best, self.best_line = score, list(path)
                if state != 1:
                    bound = self.total - (self.stock_left[p[2]] if state < 0 else 0)
                    moves = moves if bound > self.best else []
            if state == 1:
                return True
            if moves:
                self.nodes += 1
                if self.nodes > self.limit:
                    raise _OutOfBudget
                if self.rng is not None:
                    moves = list(moves)
                    self.rng.shuffle(moves)
                for move in moves:
                    path.append(move)
                    if self.search(self.apply(p, move)):
                        return True
                    path.pop()
            self.failed.add(key)
        self.failed.add(entry)
        del path[depth:]
        return False

    def run(self, start: Position | None = None) -> bool | None:
        """Search from ``start`` (default: the problem's start) with restarts: ``True`` won
        (``path`` is the line), ``False`` exhausted, ``None`` out of budget."""
        start = self.start if start is None else start
        share = FIRST_RUN_SHARE if self.t.restarts and not self.maximize else self.budget
        attempt = 0
        while self.spent < self.budget:
            self.nodes = 0
            self.path = []
            self.limit = min(share, self.budget - self.spent)
            try:
                found = self.search(start)
            except _OutOfBudget:
                self.spent += self.limit
                attempt += 1
                share *= 2
                self.rng = random.Random(attempt)
                continue
            self.spent += self.nodes
            return found
        return None

    def walk(self, steps: Sequence[Step], start: Position | None = None) -> Position:
        """The position after ``steps`` from ``start`` (default: the problem's start)."""
        p = self.start if start is None else start
        for step in steps:
            p = self.apply(p, step)
        return p


def phase(steps: Sequence[Step]) -> tuple[list[Step], bool]:
    """The first phase of a line: its moves before the first deal, and whether a deal ends it
    (the deal itself is left out)."""
    for index, step in enumerate(steps):
        if step[0] == _DEAL:
            return list(steps[:index]), True
    return list(steps), False


DEAL: Step = (_DEAL,)
"""The deal, as a search move."""


def actions(steps: Sequence[Step]) -> list[Action]:
    """A line of search moves as engine actions (a macro move is two actions)."""
    return [action for step in steps for action in _actions(step)]


def _location(source: int) -> str:
    if source < PILES:
        return bottom_location(source)
    return _row_location(source - PILES)


def _row_location(index: int) -> str:
    return row_location(index >> 3, index & 7)


def _actions(move: Step) -> list[Action]:
    kind = move[0]
    if kind == _HOME:
        source, target = move[1], move[2]
        if target == _TO_ACES:
            goal = ACES
        elif target >= 0:
            goal = _row_location(target)
        else:
            goal = bottom_location(-2 - target)
        return [Move(_location(source), goal)]
    if kind == _PARK:
        return [Move(bottom_location(move[1]), bottom_location(move[2]))]
    if kind == _MACRO:
        index, f, source = move[1], move[2], move[3]
        return [
            Move(_row_location(index), bottom_location(f)),
            Move(_location(source), _row_location(index)),
        ]
    if kind == _SWAP:
        return [Interchange(_row_location(move[1]), _row_location(move[2]))]
    return [Deal()]


# Public interface ------------------------------------------------------------------------------


def _state(engine: BlueJacket) -> State:
    return msgspec.msgpack.decode(engine.dump(), type=State)


def solve(
    engine: BlueJacket, budget: int = DEFAULT_BUDGET, techniques: Techniques = ALL
) -> Solution:
    """Solve ``engine``'s game from its current position, seeing the stock."""
    state = _state(engine)
    stock = state.order[state.revealed :]
    return solve_position(state.rows, state.bottom, len(state.aces), stock, budget, techniques)


def solve_position(
    rows: Sequence[Sequence[Sequence[str]]],
    bottom: Sequence[Sequence[str]],
    aces: int,
    stock: Sequence[str],
    budget: int = DEFAULT_BUDGET,
    techniques: Techniques = ALL,
) -> Solution:
    """Solve a position given by its piles (each bottom card first, as in a view), the number
    of Aces home and the ``stock``, top first."""
    if budget < 1:
        raise ValueError("the budget must be at least one node")
    search = Search(rows, bottom, aces, stock, budget, techniques)
    found = search.run()
    spent = search.spent
    if found is False and techniques.likely_safe_moves:
        search = Search(
            rows, bottom, aces, stock, budget - spent, replace(techniques, likely_safe_moves=False)
        )
        found = search.run()
        spent += search.spent
    outcome: Outcome = "unknown" if found is None else "winnable" if found else "not_winnable"
    return Solution(
        outcome=outcome,
        moves=actions(search.path) if found else [],
        nodes=spent,
        best=search.total if found else search.best,
    )


def solve_deal(seed: str, budget: int = DEFAULT_BUDGET, techniques: Techniques = ALL) -> Solution:
    """Solve the deal of ``seed`` (e.g. :func:`deal_seed`) from its start."""
    return solve(BlueJacket.new(Config(progress_budget=0), seed), budget, techniques)


def best_score(engine: BlueJacket, budget: int = DEFAULT_BUDGET) -> BestScore:
    """The score perfect play reaches from ``engine``'s position, seeing the stock (the par of
    a finished deal, replayed from its start): 104 for a winnable deal, else the best score a
    branch-and-bound search finds within ``budget`` more nodes."""
    won = solve(engine, budget)
    if won.outcome == "winnable":
        return BestScore(score=won.best, exact=True, nodes=won.nodes)
    state = _state(engine)
    stock = state.order[state.revealed :]
    search = Search(state.rows, state.bottom, len(state.aces), stock, budget, PROVED, True)
    found = search.run()
    return BestScore(score=search.best, exact=found is not None, nodes=won.nodes + search.spent)


def deal_par(engine: BlueJacket, budget: int = PAR_BUDGET) -> BestScore:
    """The par of ``engine``'s deal: the score perfect play reaches from the deal's start,
    seeing the stock (for a game built from a position rather than dealt: from its current
    position). Never below the player's score (their line is itself possible): when the budget
    runs out first, the par is the better of the two and is not exact."""
    state = _state(engine)
    try:
        start = BlueJacket.from_order(Config(progress_budget=0), state.order)
    except ValueError:  # a game built from a position, not dealt: its par is from here
        start = engine
    par = best_score(start, budget)
    if par.score < engine.score:
        return BestScore(score=engine.score, exact=False, nodes=par.nodes)
    return par


# Numbered deals ------------------------------------------------------------------------------


def deal_seed(number: int) -> str:
    """The public seed of numbered deal ``number``, as the server deals it."""
    return f"{BlueJacket.game}:deal:{number}"


def solve_numbered(
    number: int, budget: int = DEFAULT_BUDGET, techniques: Techniques = ALL
) -> tuple[DealResult, Solution]:
    """Solve numbered deal ``number``, timing it in CPU seconds (the process's own time, which
    other load on the machine disturbs less than wall time)."""
    started = time.process_time()
    solution = solve_deal(deal_seed(number), budget, techniques)
    result = DealResult(
        deal=number,
        outcome=solution.outcome,
        nodes=solution.nodes,
        seconds=time.process_time() - started,
        actions=len(solution.moves),
    )
    return result, solution


def summarize(results: Sequence[DealResult]) -> dict[str, Any]:
    """Figures over many solved deals: outcomes, the decided and winnable fractions (with 95%
    Wilson intervals), and CPU seconds and nodes per deal (median, 95th percentile, max)."""
    deals = len(results)
    counts = Counter(result.outcome for result in results)
    decided = counts["winnable"] + counts["not_winnable"]
    seconds = [result.seconds for result in results]
    nodes = [result.nodes for result in results]
    return {
        "deals": deals,
        "winnable": counts["winnable"],
        "not_winnable": counts["not_winnable"],
        "unknown": counts["unknown"],
        "decided_fraction": decided / deals,
        "decided_ci95": list(wilson(decided, deals)),
        "winnable_fraction": counts["winnable"] / deals,
        "winnable_ci95": list(wilson(counts["winnable"], deals)),
        "seconds_median": percentile(seconds, 0.5),
        "seconds_p95": percentile(seconds, 0.95),
        "seconds_max": max(seconds),
        "nodes_median": percentile(nodes, 0.5),
        "nodes_p95": percentile(nodes, 0.95),
        "nodes_max": max(nodes),
        "undecided": [result.deal for result in results if result.outcome == "unknown"],
        "not_winnable_deals": [r.deal for r in results if r.outcome == "not_winnable"],
    }
