"""Small Blue Jacket positions and an exhaustive search over the engine, to check the solver.

A small position keeps most row piles complete (four cards, so nothing more builds on them) and
puts the few remaining cards loose: misplaced in row piles, on the bottom row and in a short
stock. The brute force tries every legal action of the engine itself (no reduction at all), so
it is an independent model of what is reachable.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import msgspec

from blackdrez.games.blue_jacket.rules import (
    PILES,
    ROWS,
    STARTERS,
    BlueJacket,
    Config,
    Resign,
    State,
)
from blackdrez.games.cards import RANKS, SUITS, standard_deck

DECK = Counter(standard_deck(2))


@dataclass(frozen=True)
class Small:
    """A position: row piles and bottom piles (bottom card first), Aces home, stock top first."""

    rows: list[list[list[str]]]
    bottom: list[list[str]]
    aces: list[str]
    stock: list[str]

    def engine(self) -> BlueJacket:
        """The position as a game (its order: the open cards, then the stock)."""
        rows = [[list(pile) for pile in row] for row in self.rows]
        bottom = [list(pile) for pile in self.bottom]
        shown = [card for row in rows for pile in row for card in pile]
        shown += [card for pile in bottom for card in pile] + list(self.aces)
        assert not Counter(shown + self.stock) - DECK
        state = State(
            config=Config(progress_budget=0),
            seed=None,
            commitment=None,
            order=shown + list(self.stock),
            revealed=len(shown),
            rows=rows,
            bottom=bottom,
            aces=list(self.aces),
            moves=0,
            progress=None,
            over=False,
            won=False,
            ending=None,
        )
        return BlueJacket(state)

    def cards(self) -> int:
        """How many cards the position holds (its score when every one is home)."""
        return (
            sum(len(pile) for row in self.rows for pile in row)
            + sum(len(pile) for pile in self.bottom)
            + len(self.aces)
            + len(self.stock)
        )


def _chain(row: int, suit: str) -> list[str]:
    return [f"{RANKS[rank - 1]}{suit}" for rank in range(STARTERS[row], 14, 3)]


def small_position(seed: int, active: int = 3, stock_deals: int = 1) -> Small:
    """A random small position: ``active`` row piles not yet complete, their missing cards
    (and a few Aces) loose, ``stock_deals`` deals' worth of them in the stock when there are
    enough. Every other row pile is complete."""
    rng = random.Random(seed)
    slots = [(row, slot) for row in range(ROWS) for slot in range(PILES)]
    chosen = set(rng.sample(slots, active))
    rows: list[list[list[str]]] = [[] for _ in range(ROWS)]
    loose: list[str] = []
    for row, slot in slots:
        chain = _chain(row, SUITS[slot % 4])
        if (row, slot) in chosen:
            height = rng.randrange(0, 3)
            rows[row].append(chain[:height])
            loose += chain[height:]
        else:
            rows[row].append(chain)
    aces = [f"A{SUITS[i % 4]}" for i in range(8)]
    home = rng.randrange(5, 9)
    loose += aces[home:]
    rng.shuffle(loose)
    for row in range(ROWS):
        for pile in rows[row]:
            if not pile and loose and rng.random() < 0.7:
                pile.append(loose.pop())
    stock = [loose.pop() for _ in range(min(len(loose) - 2, PILES * stock_deals))]
    bottom: list[list[str]] = [[] for _ in range(PILES)]
    for card in loose:
        bottom[rng.randrange(PILES)].append(card)
    return Small(rows=rows, bottom=bottom, aces=aces[:home], stock=stock)


def _key(engine: BlueJacket) -> bytes:
    view = engine.view(0)
    return msgspec.msgpack.encode([view.rows, view.bottom, len(view.aces), view.stock_count])


def all_home(engine: BlueJacket, cards: int) -> bool:
    """Whether every card of a position holding ``cards`` cards is on a foundation."""
    return engine.score == cards


def brute_force(position: Small, limit: int = 200_000) -> tuple[bool, int]:
    """``(a win is reachable, the best reachable score)`` over every legal action sequence.

    Raises ``RuntimeError`` past ``limit`` positions (the position is too big to check).
    """
    cards = position.cards()
    seen: set[bytes] = set()
    start = position.engine()
    stack = [start.dump()]
    best = start.score
    while stack:
        engine = BlueJacket.load(stack.pop())
        best = max(best, engine.score)
        if engine.score == cards:
            return True, cards
        for action in engine.legal_actions(0):
            if isinstance(action, Resign):
                continue
            child = BlueJacket.load(engine.dump())
            child.apply(0, action)
            key = _key(child)
            if key not in seen:
                seen.add(key)
                if len(seen) > limit:
                    raise RuntimeError("too many positions for a brute force")
                stack.append(child.dump())
    return False, best
