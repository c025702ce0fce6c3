"""Helpers shared by the BlackDrez tests (no tests here): stacked stocks, started games."""

from __future__ import annotations

from collections import Counter

from blackdrez.games.blackdrez.rules import SYSTEM, BlackDrez, Config, StartRound
from blackdrez.games.cards import pokerdrez_deck


def stack(figures: str, *, decks: int = 1, fill: bool = True) -> list[str]:
    """A stock whose top cards have the given figures (e.g. ``"QQRJ"``), each a distinct card.

    With ``fill`` the rest of the deck follows in canonical order; without it the stock is short.
    """
    remaining = pokerdrez_deck(decks)
    top = []
    for figure in figures.replace(" ", ""):
        card = next(card for card in remaining if card[0] == figure)
        remaining.remove(card)
        top.append(card)
    return top + remaining if fill else top


def game(
    figures: str,
    *,
    seats: int = 4,
    dealer: int = 0,
    fill: bool = True,
    start: list[int] | None = None,
    **config: int,
) -> tuple[BlackDrez, list]:
    """A game from a stacked stock, with its first round started; returns the engine and events."""
    cfg = Config(seats=seats, first_dealer=dealer, **config)
    engine = BlackDrez.from_order(cfg, stack(figures, decks=cfg.deck_count, fill=fill))
    events = engine.apply(
        SYSTEM, StartRound(seats=start if start is not None else list(range(seats)))
    )
    return engine, events


def table_cards(engine: BlackDrez) -> Counter[str]:
    """Every card outside the stock, counted from the state."""
    state = engine.state
    cards: Counter[str] = Counter(state.pot) + Counter(state.carry_over) + Counter(state.set_aside)
    for hand in state.hands:
        cards.update(hand)
    for pile in state.piles:
        cards.update(pile)
    return cards
