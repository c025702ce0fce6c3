"""The Blue Jacket expert: plays from the player's view alone by imagining the stock.

Theory of operation
-------------------
The player sees every card but the stock's order; the stock's cards are known as a multiset
(two decks less the open cards and the Aces home). The expert draws :data:`SAMPLES` orders of
that multiset (*determinization*) from a generator seeded by the view, so its choice is a pure
function of the view, and solves each imagined game with the solver
(:mod:`blackdrez.games.blue_jacket.solver`, perfect information, :data:`SAMPLE_BUDGET` nodes).

No card is revealed until the next deal, so the expert plans a whole *phase*: the moves up to and
including that deal. Every imagined game the solver wins proposes the first phase of its winning
line. Proposals that reach the same position at the deal are one candidate; the most frequent
:data:`CANDIDATES` are each tried against every imagined stock (deal its next cards and solve on)
and the candidate that wins the most imagined games is played (ties: the most proposed). When no
imagined game is won, the expert plays the first phase of the line that scores most in the first
one. After the last deal nothing is hidden: the solver plays exactly (the best score when the
game cannot be won).

:func:`plan` returns the phase (a pure function of the view); :func:`hint` its first move (the
hint a player may ask for). :class:`ExpertBot`, the ``expert`` strategy, plays a planned phase to
its end while the views are the ones it predicted, and plans again otherwise (after every deal),
so it solves about ten times a game instead of at every move.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Sequence

import msgspec

from blackdrez.games.blue_jacket.rules import (
    Action,
    BlueJacket,
    Config,
    Deal,
    Resign,
    State,
    View,
)
from blackdrez.games.blue_jacket.solver import DEAL, Search, Step, actions, phase
from blackdrez.games.cards import standard_deck

SAMPLES = 8
"""Imagined stocks per plan."""
SAMPLE_BUDGET = 1_500
"""Solver nodes for one imagined game."""
CANDIDATES = 3
"""Phases tried against every imagined stock."""
EXACT_BUDGET = 50_000
"""Solver nodes once the stock is empty (nothing is hidden then)."""

_DECK = Counter(standard_deck(2))


def _open_cards(view: View) -> list[str]:
    cards = [card for row in view.rows for pile in row for card in pile]
    cards += [card for pile in view.bottom for card in pile]
    return cards + list(view.aces)


def unseen(view: View) -> list[str]:
    """The stock's cards as the player knows them: a sorted multiset.

    Raises ``ValueError`` when the view does not leave exactly ``stock_count`` unseen cards.
    """
    rest = _DECK - Counter(_open_cards(view))
    cards = sorted(rest.elements())
    if len(cards) != view.stock_count or sum(rest.values()) + len(_open_cards(view)) != 104:
        raise ValueError("the view does not hold the two decks less the stock")
    return cards


def _rng(view: View) -> random.Random:
    """A generator seeded by what the view shows (so a plan is a pure function of it)."""
    shown = msgspec.json.encode([view.rows, view.bottom, view.aces, view.stock_count])
    return random.Random(hashlib.sha256(shown).digest())


def _searches(view: View, stocks: Sequence[Sequence[str]], budget: int) -> list[Search]:
    return [Search(view.rows, view.bottom, len(view.aces), stock, budget) for stock in stocks]


def _choose(searches: list[Search]) -> list[Step]:
    """The phase that wins the most imagined games (module docstring)."""
    proposals: dict[object, list[Step]] = {}
    votes: Counter[object] = Counter()
    wins: dict[object, set[int]] = {}
    for index, search in enumerate(searches):
        if search.run():
            steps, deals = phase(search.path)
            at_deal = search.key(search.walk(steps))
            proposals.setdefault(at_deal, [*steps, DEAL] if deals else steps)
            votes[at_deal] += 1
            wins.setdefault(at_deal, set()).add(index)
    if not proposals:
        best = searches[0].again(maximize=True)
        best.run()
        steps, deals = phase(best.best_line)
        return [*steps, DEAL] if deals else steps
    ranked = [key for key, _ in votes.most_common(CANDIDATES)]
    if votes[ranked[0]] == len(searches):
        return proposals[ranked[0]]
    best_key, best_wins = ranked[0], -1
    for key in ranked:
        steps = proposals[key]
        won = 0
        for index, search in enumerate(searches):
            if index not in wins[key]:
                trial = search.again()
                if not trial.run(trial.walk(steps)):
                    continue
            won += 1
        if won > best_wins:
            best_key, best_wins = key, won
    return proposals[best_key]


def plan(view: View, samples: int = SAMPLES, budget: int = SAMPLE_BUDGET) -> list[Action]:
    """The expert's moves from ``view`` up to and including the next deal (after the last deal:
    to the end). Empty when the game is over or nothing is worth playing."""
    if view.over:
        return []
    cards = unseen(view)
    if not cards:
        exact = Search(view.rows, view.bottom, len(view.aces), [], EXACT_BUDGET)
        if exact.run():
            return actions(exact.path)
        best = Search(view.rows, view.bottom, len(view.aces), [], EXACT_BUDGET, maximize=True)
        best.run()
        return actions(best.best_line)
    rng = _rng(view)
    stocks = [rng.sample(cards, len(cards)) for _ in range(samples)]
    return actions(_choose(_searches(view, stocks, budget)))


def hint(view: View) -> Action | None:
    """The expert's next move for ``view`` (``None`` when the game is over or no move helps)."""
    steps = plan(view)
    return steps[0] if steps else None


def _shown(view: View) -> bytes:
    return msgspec.json.encode([view.rows, view.bottom, view.aces, view.stock_count])


def _predicted(view: View, moves: Sequence[Action]) -> list[bytes]:
    """What the view shows before each of ``moves`` (none after a deal: it reveals cards)."""
    rows = [[list(pile) for pile in row] for row in view.rows]
    bottom = [list(pile) for pile in view.bottom]
    shown = [card for row in rows for pile in row for card in pile]
    shown += [card for pile in bottom for card in pile] + list(view.aces)
    state = State(
        config=Config(progress_budget=0),
        seed=None,
        commitment=None,
        order=shown + unseen(view),
        revealed=len(shown),
        rows=rows,
        bottom=bottom,
        aces=list(view.aces),
        moves=view.moves,
        progress=None,
        over=False,
        won=False,
        ending=None,
    )
    engine = BlueJacket(state)
    before = []
    for move in moves:
        before.append(_shown(engine.view(0)))
        engine.apply(0, move)
    return before


class ExpertBot:
    """The ``expert`` strategy: plays :func:`plan`'s phase while each view is the one predicted,
    plans again otherwise. One instance may play any number of games, one move at a time."""

    def __init__(self, samples: int = SAMPLES, budget: int = SAMPLE_BUDGET) -> None:
        self.samples = samples
        self.budget = budget
        self.queue: list[tuple[bytes, Action]] = []

    def __call__(self, view: View, legal: Sequence[Action]) -> Action:
        """The next move for ``view`` (one of ``legal``)."""
        if self.queue and self.queue[0][0] == _shown(view) and self.queue[0][1] in legal:
            return self.queue.pop(0)[1]
        moves = plan(view, self.samples, self.budget)
        self.queue = list(zip(_predicted(view, moves), moves, strict=True))
        if self.queue and self.queue[0][1] in legal:
            return self.queue.pop(0)[1]
        self.queue = []
        if Deal() in legal:
            return Deal()
        return next((a for a in legal if not isinstance(a, Resign)), legal[0])
