"""The Blackjack Piles expert: counts the cards it has seen and chooses by expected value.

Theory of operation
-------------------
In a round the player has seen every card drawn so far: those on the piles, the stock's face-up
top, and those cashed. The rest of the stock is therefore known as a multiset (the round's deck
less the seen cards), and so is the chance that the next card is worth each of 1 to 10 points
(:class:`Odds`). The reference ``greedy`` bot scores positions against a full deck's odds; the
expert uses the true ones, which matter more and more as the stock runs down.

A position (the piles) is scored by its *potential*: for every group of pile tops, the chance
that the next card completes it to 21, plus :data:`PAIR_WEIGHT` times the chance that the next
two do (without the stock's top in hands, the completing card needs another pile to go on);
less :data:`FULL_PILE_PENALTY` per full pile. The expert looks stock cards ahead: for each legal
action it takes the expectation, over the next card's points, of the best reply (cash when a
hand is there, else the placement or move with the best potential), and adds
:data:`CASH_WEIGHT` per card an action takes off the table. It looks one card ahead in rounds 1
to 4 and two from round 5 on (:data:`DEEP_LOOK_AHEAD`, :data:`DEEP_FROM_ROUND`), where the
multipliers are highest and the pass rates lowest: measured on rounds played alone (60 deals
each), that lifts round 5's pass rate from about 0.21 to 0.65. Two cards ahead in round 4 too
(four piles: many positions) scores about 14% more a game for 2.5 times the CPU, and in round 3
too about 17% more for 4 times (208 paired deals, ``docs/solitaire.md``): too much for the
benchmark of 2,000 games on the project's shared machine. :data:`DEEP_FROM_ROUND` is where
that trade is set.

What makes it affordable, without changing a single value: the group enumeration of a shape,
the replies to a card and the placements on piles do not depend on the odds, so they are
remembered across decisions (:func:`_groups`, :func:`_replies`, :func:`_placements`); the last
card ahead, where nearly all positions are, is valued from the piles' tops and room alone
(:data:`Sig`), for every possible card at once; a decision with a single candidate (actions
leading to the same piles count once) is not looked at; and a cash or a move shows no new card,
so the next decision keeps the look-ahead and what it remembered (:func:`_lookahead`).
``tests/games/test_blackjack_piles_expert.py`` checks the values against the plain recursion,
float for float.

The view does not list the cards cashed earlier in the round, so :class:`PilesExpert` (the
``expert`` strategy) remembers its own cashes; :func:`hint` takes them as an argument, and
:func:`seen_cashed` reads them from a game (they were all shown to the player).
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Sequence

from blackdrez.games.blackjack_piles.rules import (
    MAX_HAND,
    TARGET,
    Action,
    BlackjackPiles,
    Cash,
    EndRound,
    Move,
    Place,
    RoundRules,
    View,
    card_points,
    missing_to_21,
)
from blackdrez.games.cards import standard_deck

PAIR_WEIGHT = 5.0
"""How much a group two cards short of 21 counts against one a single card short."""
CASH_WEIGHT = 4.0
"""What one card taken off the table is worth, in units of potential."""
LOOK_AHEAD = 1
"""Stock cards the expert looks ahead in the first rounds, which it passes nearly always..."""
DEEP_LOOK_AHEAD = 2
"""...and from round :data:`DEEP_FROM_ROUND` on, where the score's multipliers are high and
the pass rates low (several times the CPU of one card)."""
DEEP_FROM_ROUND = 5
FULL_PILE_PENALTY = 1.0
"""What a full pile costs: it takes no more cards, so it brings a stuck round nearer."""

_DECK_POINTS = Counter(card_points(card) for card in standard_deck())


class Odds:
    """The next card's points, drawn from the multiset of cards not yet seen."""

    def __init__(self, unseen: Counter[int]) -> None:
        total = sum(unseen.values())
        self.memo = _Completions(self)
        """How promising each group of pile tops is, by the group's sorted points."""
        self.single = [unseen.get(value, 0) / total if total else 0.0 for value in range(11)]
        """``single[v]``: the chance that the next card is worth ``v`` points."""
        self.pair = [0.0] * (TARGET + 1)
        """``pair[m]``: the chance that the next two cards can total ``m`` (Aces 1 or 11)."""
        if total >= 2:
            for first, second in itertools.product(range(1, 11), repeat=2):
                ways = unseen.get(first, 0) * (unseen.get(second, 0) - (first == second))
                if ways <= 0:
                    continue
                chance = ways / (total * (total - 1))
                aces = (first == 1) + (second == 1)
                for missing in {first + second + 10 * soft for soft in range(aces + 1)}:
                    if missing <= TARGET:
                        self.pair[missing] += chance


class _Completions(dict[tuple[int, ...], float]):
    """How promising a group of cards worth ``values`` (sorted) is (module docstring), by
    group, computed at the first look-up."""

    def __init__(self, odds: Odds) -> None:
        super().__init__()
        self.odds = odds

    def __missing__(self, values: tuple[int, ...]) -> float:
        needed, pairs = missing_to_21(values)
        pair = max((self.odds.pair[missing] for missing in pairs), default=0.0)
        value = sum(self.odds.single[value] for value in needed) + PAIR_WEIGHT * pair
        self[values] = value
        return value


class _Potentials(dict["Shape", float]):
    """The potential of piles by their :data:`Shape` (module docstring), computed at the first
    look-up."""

    def __init__(self, odds: Odds, stock_in_hand: bool) -> None:
        super().__init__()
        self.completes = odds.memo.__getitem__
        self.stock_in_hand = stock_in_hand

    def __missing__(self, shape: Shape) -> float:
        full, groups = _groups(shape, self.stock_in_hand)
        value = -FULL_PILE_PENALTY * full + sum(map(self.completes, groups))
        self[shape] = value
        return value


Shape = tuple[tuple[int, bool], ...]
"""Piles as the potential sees them: ``(top points or 0 when empty, takes a card)``, sorted."""
Sig = tuple[tuple[int, int], ...]
"""Piles as a placement sees them: ``(top points or 0 when empty, room)``, sorted, where room
is 0 for a pile that still takes a card after one more, 1 for one that takes just one more,
2 for a full one: all that the shapes of the placements on them depend on."""


def _shape(piles: Sequence[Sequence[int]], cap: int | None) -> Shape:
    return tuple(
        sorted((pile[-1] if pile else 0, cap is None or len(pile) < cap) for pile in piles)
    )


def _sig(piles: Sequence[Sequence[int]], cap: int | None) -> Sig:
    if cap is None:
        return tuple(sorted((pile[-1] if pile else 0, 0) for pile in piles))
    return tuple(
        sorted(
            (pile[-1] if pile else 0, 0 if len(pile) < cap - 1 else 2 - (cap - len(pile)))
            for pile in piles
        )
    )


@functools.lru_cache(maxsize=1 << 16)
def _hand_points(tops: tuple[int, ...], stock_in_hand: bool) -> frozenset[int]:
    """The points (1 to 10) of a stock card that leave a hand among pile tops worth ``tops``
    and it."""
    return frozenset(
        points for points in range(1, 11) if _hands(tops, points if stock_in_hand else 0)
    )


@functools.lru_cache(maxsize=1 << 18)
def _placements(sig: Sig, top: int) -> tuple[Shape, ...]:
    """The shapes a card worth ``top`` placed on each pile of ``sig`` that takes it makes."""
    shape = [(points, room < 2) for points, room in sig]
    found: dict[Shape, None] = {}
    for index, (points, room) in enumerate(sig):
        # equal piles are adjacent in a sorted sig: placing on either makes the same shape
        if room < 2 and (index == 0 or sig[index - 1] != (points, room)):
            placed = shape.copy()
            placed[index] = (top, room == 0)
            found[tuple(sorted(placed))] = None
    return tuple(found)


@functools.lru_cache(maxsize=1 << 16)
def _groups(shape: Shape, stock_in_hand: bool) -> tuple[int, tuple[tuple[int, ...], ...]]:
    """The full piles of a shape, and the groups of pile tops whose completion counts (as sorted
    points): what the potential sums, whatever the odds."""
    tops = [(index, top) for index, (top, _) in enumerate(shape) if top]
    full = sum(not takes for _, takes in shape)
    groups = []
    for size in range(1, min(MAX_HAND - 1, len(tops)) + 1):
        for group in itertools.combinations(tops, size):
            if not stock_in_hand:
                members = {index for index, _ in group}
                if not any(takes for i, (_, takes) in enumerate(shape) if i not in members):
                    continue
            groups.append(tuple(sorted(value for _, value in group)))
    return full, tuple(groups)


Piles = tuple[tuple[int, ...], ...]
"""Piles of points, sorted (piles are interchangeable): the look-ahead's positions."""


@functools.lru_cache(maxsize=1 << 16)
def _hands(tops: tuple[int, ...], top: int) -> tuple[tuple[tuple[int, ...], bool], ...]:
    """Every hand among pile tops worth ``tops`` (0: an empty pile) and the stock's card worth
    ``top`` (0: it may not join): ``(pile indices, whether the stock's card is in it)``."""
    sources = [(index, points) for index, points in enumerate(tops) if points]
    if top:
        sources.append((-1, top))
    found = []
    for size in range(2, min(MAX_HAND, len(sources)) + 1):
        for combo in itertools.combinations(sources, size):
            points = [value for _, value in combo]
            missing = TARGET - sum(points)
            if missing >= 0 and missing % 10 == 0 and missing // 10 <= points.count(1):
                chosen = tuple(index for index, _ in combo if index >= 0)
                found.append((chosen, len(chosen) < size))
    return tuple(found)


class _Lookahead:
    """Expected values a few stock cards ahead (module docstring), remembered per position.

    Nearly all the positions are one card from the end of the look-ahead. There, a card that
    makes no hand with the pile tops is worth the best potential of its placements, which
    depends only on the piles' :data:`Sig`: computed for every card at once and remembered by
    it, so positions that differ only below their tops are valued once.
    """

    def __init__(self, rules: RoundRules, odds: Odds) -> None:
        self.cap = rules.cap
        self.stock_in_hand = rules.stock_in_hand
        self.potential = _Potentials(odds, rules.stock_in_hand)
        self.draws = [(points, chance) for points, chance in enumerate(odds.single) if chance > 0]
        self.memo: dict[tuple[Piles, int | None, int], float] = {}
        self.last: dict[tuple[Piles, int], float] = {}
        self.drawn: dict[Piles, float] = {}
        self.drawn_sig: dict[Sig, float] = {}
        self.placed: dict[Sig, list[float]] = {}

    def value(self, piles: Piles, top: int | None, cards: int) -> float:
        """The value of ``piles`` with ``top`` showing (``None``: to be drawn), looking
        ``cards`` more stock cards ahead."""
        if cards == 0:
            if top is None:
                return self.potential[_shape(piles, self.cap)]
            return self.reply(piles, top)
        if top is None and cards == 1:
            return self.one_ahead(piles)
        key = (piles, top, cards)
        known = self.memo.get(key)
        if known is not None:
            return known
        if top is None:
            value = sum(
                chance * self.value(piles, points, cards - 1) for points, chance in self.draws
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
        return value

    def one_ahead(self, piles: Piles) -> float:
        """``value(piles, None, 1)``: the expectation over the next card of the best reply."""
        known = self.drawn.get(piles)
        if known is not None:
            return known
        sig = _sig(piles, self.cap)
        known = self.drawn_sig.get(sig)
        if known is not None:
            self.drawn[piles] = known
            return known
        placed = self.placed.get(sig)
        if placed is None:
            placed = self.placed[sig] = self.place_each(sig)
        cash = _hand_points(tuple(points for points, _ in sig), self.stock_in_hand)
        if cash:
            value = sum(
                [
                    chance * (self.reply(piles, points) if points in cash else best)
                    for (points, chance), best in zip(self.draws, placed, strict=True)
                ]
            )
        else:
            value = self.drawn_sig[sig] = sum(
                [chance * best for (_, chance), best in zip(self.draws, placed, strict=True)]
            )
        self.drawn[piles] = value
        return value

    def place_each(self, sig: Sig) -> list[float]:
        """For each possible next card, the best potential of its placements on ``sig``."""
        potential = self.potential.__getitem__
        return [
            max(map(potential, _placements(sig, points)), default=-CASH_WEIGHT * 10)
            for points, _ in self.draws
        ]

    def reply(self, piles: Piles, top: int) -> float:
        """``value(piles, top, 0)``: the best reply to ``top``, valued by potential."""
        key = (piles, top)
        known = self.last.get(key)
        if known is not None:
            return known
        sig = _sig(piles, self.cap)
        if top not in _hand_points(tuple(points for points, _ in sig), self.stock_in_hand):
            potential = self.potential.__getitem__
            value = max(map(potential, _placements(sig, top)), default=-CASH_WEIGHT * 10)
        else:
            value = max(
                (
                    CASH_WEIGHT * gain
                    + (self.reply(after, top) if keeps else self.potential[_shape(after, self.cap)])
                    for gain, after, keeps in self.replies(piles, top)
                ),
                default=-CASH_WEIGHT * 10,
            )
        self.last[key] = value
        return value

    def replies(self, piles: Piles, top: int) -> tuple[tuple[int, Piles, bool], ...]:
        """``(cards cashed, piles after, the stock's card still showing)`` for each distinct
        reply to ``top``: every hand when there is one, else every placement."""
        return _replies(piles, top, self.cap, self.stock_in_hand)


@functools.lru_cache(maxsize=1 << 14)
def _replies(
    piles: Piles, top: int, cap: int | None, stock_in_hand: bool
) -> tuple[tuple[int, Piles, bool], ...]:
    """:meth:`_Lookahead.replies`, remembered across decisions (a pure function of its
    arguments). Few positions come back (200 games: 16% hits with room for 262,144, which
    filled it and held about 160 MB of the hint worker's memory; 8% with 16,384, for 2% more
    CPU): kept small."""
    tops = tuple(pile[-1] if pile else 0 for pile in piles)
    hands = _hands(tops, top if stock_in_hand else 0)
    found: dict[Piles, tuple[int, Piles, bool]] = {}
    if hands:
        for chosen, stock in hands:
            changed = list(piles)
            for index in chosen:
                changed[index] = piles[index][:-1]
            after = tuple(sorted(changed))
            found.setdefault(after, (len(chosen) + stock, after, not stock))
    else:
        for index, pile in enumerate(piles):
            if cap is None or len(pile) < cap:
                after = tuple(sorted((*piles[:index], (*pile, top), *piles[index + 1 :])))
                found.setdefault(after, (0, after, False))
    return tuple(found.values())


def _after(piles: Sequence[Sequence[int]], top: int | None, action: Action) -> Piles:
    changed = [list(pile) for pile in piles]
    match action:
        case Place(pile):
            assert top is not None
            changed[pile].append(top)
        case Cash(indices, _):
            for index in indices:
                changed[index].pop()
        case Move(source, target):
            changed[target].append(changed[source].pop())
    return tuple(sorted(tuple(pile) for pile in changed))


def unseen_points(view: View, cashed: Sequence[str]) -> Counter[int]:
    """The points of the round's cards the player has not seen: below the stock's top."""
    seen = Counter(card_points(card) for pile in view.piles for card in pile)
    seen += Counter(card_points(card) for card in cashed)
    if view.stock_top is not None:
        seen[card_points(view.stock_top)] += 1
    return _DECK_POINTS - seen


@functools.lru_cache(maxsize=1)
def _lookahead(unseen: tuple[int, ...], rules: RoundRules) -> _Lookahead:
    """The look-ahead for the unseen cards' points (1 to 10), kept for the next decision:
    a cash or a move shows no new card, so the decision after it has the same odds."""
    return _Lookahead(rules, Odds(Counter(dict(enumerate(unseen, start=1)))))


def _outcome(
    piles: Sequence[Sequence[int]], top: int | None, action: Action
) -> tuple[Piles, bool, int]:
    """What decides an action's worth: the piles after it, whether it uses the stock's card,
    and how many cards it takes off the table."""
    consumed = isinstance(action, Place) or (isinstance(action, Cash) and action.stock)
    removed = len(action.piles) + action.stock if isinstance(action, Cash) else 0
    return _after(piles, top, action), consumed, removed


def choose(view: View, legal: Sequence[Action], cashed: Sequence[str] = ()) -> Action:
    """The expert's action for ``view`` (one of ``legal``), knowing the cards ``cashed`` so far
    this round (module docstring)."""
    rules = view.rules
    piles = [[card_points(card) for card in pile] for pile in view.piles]
    top = card_points(view.stock_top) if view.stock_top is not None else None
    cashes: list[Action] = [action for action in legal if isinstance(action, Cash)]
    # actions that lead to the same piles are worth the same: the first of them stands for all
    distinct: dict[tuple[Piles, bool, int], Action] = {}
    for action in cashes or [a for a in legal if isinstance(a, Place | Move)]:
        distinct.setdefault(_outcome(piles, top, action), action)
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    unseen = unseen_points(view, cashed)
    look = _lookahead(tuple(unseen[points] for points in range(1, 11)), rules)
    depth = DEEP_LOOK_AHEAD if view.round >= DEEP_FROM_ROUND else LOOK_AHEAD
    best: Action | None = None
    best_value = 0.0
    for (after, consumed, removed), action in distinct.items():
        cards = min(depth, view.stock_count - 1 if consumed else view.stock_count)
        ahead = look.value(after, None if consumed else top, max(cards, 0))
        value = CASH_WEIGHT * removed + ahead
        if best is None or value > best_value:
            best, best_value = action, value
    if best is not None:
        return best
    return next((action for action in legal if isinstance(action, EndRound)), legal[0])


def hint(view: View, legal: Sequence[Action], cashed: Sequence[str] = ()) -> Action | None:
    """The expert's suggestion for ``view`` (``None`` once the game is over)."""
    return choose(view, legal, cashed) if legal else None


def seen_cashed(engine: BlackjackPiles) -> list[str]:
    """The cards cashed so far in the current round: every one was shown to the player."""
    state = engine.state
    deck = state.decks[state.round - state.config.first_round]
    drawn = deck[: state.drawn[-1]]
    rest = Counter(drawn) - Counter(card for pile in state.piles for card in pile)
    return sorted(rest.elements())


class PilesExpert:
    """The ``expert`` strategy: :func:`choose`, remembering the cards it cashed this round.

    It checks each view against the one its last action should lead to; on anything else (a
    new round, another game) it starts counting afresh.
    """

    def __init__(self) -> None:
        self.cashed: list[str] = []
        self.expect: tuple[int, list[list[str]]] | None = None

    def __call__(self, view: View, legal: Sequence[Action]) -> Action:
        """The next action for ``view`` (one of ``legal``)."""
        if self.expect != (view.round, view.piles):
            self.cashed = []
        action = choose(view, legal, self.cashed)
        piles = [list(pile) for pile in view.piles]
        if isinstance(action, Cash):
            self.cashed += [piles[index][-1] for index in action.piles]
            if action.stock and view.stock_top is not None:
                self.cashed.append(view.stock_top)
        top = view.stock_top
        match action:
            case Place(pile) if top is not None:
                piles[pile].append(top)
            case Cash(indices, _):
                for index in indices:
                    piles[index].pop()
            case Move(source, target):
                piles[target].append(piles[source].pop())
        self.expect = (view.round, piles)
        return action
