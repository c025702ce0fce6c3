"""Helpers for the Blue Jacket tests: positions from a compact text form, card counting."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from blackdrez.games.blue_jacket.rules import BlueJacket, Config, State
from blackdrez.games.cards import standard_deck

DECK = Counter(standard_deck(2))


def piles(text: str) -> list[list[str]]:
    """Eight piles from text: entries split by spaces, cards of a pile joined by commas, "-" empty.

    ``piles("2S,5S - 9C")`` gives ``[["2S", "5S"], [], ["9C"], [], [], [], [], []]``: missing
    entries are empty piles.
    """
    entries = text.split()
    assert len(entries) <= 8, text
    entries += ["-"] * (8 - len(entries))
    return [[] if entry == "-" else entry.split(",") for entry in entries]


def position(
    rows: tuple[str, ...] = (),
    bottom: str = "",
    aces: str = "",
    stock: str = "",
    budget: int = 0,
) -> BlueJacket:
    """A game in the given position: up to three rows, ``stock`` top first.

    The position need not hold all 104 cards; its open cards come first in the order.
    """
    assert len(rows) <= 3
    row_piles = [piles(text) for text in (*rows, "", "", "")[:3]]
    bottom_piles = piles(bottom)
    ace_cards = aces.split()
    stock_cards = stock.split()
    visible = [card for row in row_piles for pile in row for card in pile]
    visible += [card for pile in bottom_piles for card in pile] + ace_cards
    assert not Counter(visible + stock_cards) - DECK, "more copies than two decks hold"
    state = State(
        config=Config(progress_budget=budget),
        seed=None,
        commitment=None,
        order=visible + stock_cards,
        revealed=len(visible),
        rows=row_piles,
        bottom=bottom_piles,
        aces=ace_cards,
        moves=0,
        progress=None,
        over=False,
        won=False,
        ending=None,
    )
    return BlueJacket(state)


USELESS_ROWS = (
    "5S 5H 5D 5C 6S 6H 6D 6C",
    "7S 7H 7D 7C 8S 8H 8D 8C",
    "9S 9H 9D 9C TS TH TD TC",
)
"""Every row pile holds one misplaced card that can never score while no row pile is a
foundation: no Aces, no starting ranks."""

USELESS_STOCK = "JS JH JD JC QS QH QD QC KS KH KD KC JS JH JD JC"
"""Two deals that can never score in a position without foundations."""


def cards_in(value: Any) -> Counter[str]:
    """Every card name in a msgspec-serializable value (a view, an event), as a multiset."""
    found: Counter[str] = Counter()

    def walk(item: Any) -> None:
        if isinstance(item, str):
            if item in DECK:
                found[item] += 1
        elif isinstance(item, list):
            for element in item:
                walk(element)
        elif isinstance(item, dict):
            for key, element in item.items():
                if key not in ("seed", "commitment", "type"):
                    walk(element)

    walk(msgspec.json.decode(msgspec.json.encode(value)))
    return found


def everywhere(engine: BlueJacket) -> Counter[str]:
    """All 104 cards of a game built with ``new`` or ``from_order``: table, Aces pile, stock."""
    view = engine.view(None)
    table = Counter(card for row in view.rows for pile in row for card in pile)
    table += Counter(card for pile in view.bottom for card in pile) + Counter(view.aces)
    return table + Counter(stock_of(engine))


def stock_of(engine: BlueJacket) -> list[str]:
    """The stock, top first (test-only access to the hidden cards)."""
    state = msgspec.msgpack.decode(engine.dump(), type=State)
    return state.order[state.revealed :]
