"""Card names and canonical deck orders shared by the engines.

A card is a short string, the same in state, views, events, replays and on the wire.

* **PokerDrez** (BlackDrez): figure letter then number, e.g. ``"Q7"``. Figures: ``Q`` Queen,
  ``R`` Rook, ``B`` Bishop, ``N`` Knight, ``P`` Pawn, ``J`` Joker; numbers 1-9. The two neutral
  cards are not used. Canonical order: figures in the order ``QRBNPJ``, numbers 1 to 9 within each.
* **Standard** (the solitaires): rank then suit, e.g. ``"TD"`` for the Ten of Diamonds. Ranks
  ``A23456789TJQK``, suits ``CDHS``. Canonical order: suits in the order ``CDHS``, ranks ``A`` to
  ``K`` within each.

A game with two decks uses the canonical order twice, one deck after the other.
"""

from __future__ import annotations

FIGURES = "QRBNPJ"
FIGURE_NAMES = {"Q": "Queen", "R": "Rook", "B": "Bishop", "N": "Knight", "P": "Pawn", "J": "Joker"}
FIGURE_POINTS = {"Q": 5, "R": 4, "B": 3, "N": 2, "P": 1, "J": 6}
"""Points by figure; a Joker counts 6 or 1 (see ``blackdrez.hand_value``)."""
NUMBER_COLOURS = {
    1: "gray",
    2: "red",
    3: "magenta",
    4: "purple",
    5: "blue",
    6: "yellow",
    7: "cyan",
    8: "orange",
    9: "green",
}

RANKS = "A23456789TJQK"
SUITS = "CDHS"
RANK_VALUE = {rank: index + 1 for index, rank in enumerate(RANKS)}
"""A standard card's rank as a number: Ace 1, Ten 10, Jack 11, Queen 12, King 13."""


_POKERDREZ = tuple(f"{figure}{number}" for figure in FIGURES for number in range(1, 10))
_STANDARD = tuple(f"{rank}{suit}" for suit in SUITS for rank in RANKS)


def pokerdrez_deck(decks: int = 1) -> list[str]:
    """Return ``decks`` PokerDrez decks (54 cards each) in canonical order (a new list)."""
    return list(_POKERDREZ * decks)


def standard_deck(decks: int = 1) -> list[str]:
    """Return ``decks`` standard 52-card decks in canonical order (a new list)."""
    return list(_STANDARD * decks)


def rank_of(card: str) -> int:
    """Return a standard card's rank as a number (Ace 1 ... King 13)."""
    return RANK_VALUE[card[0]]
