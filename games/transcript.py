"""A game's events as sentences a person reads: the transcript ``blackdrez replay`` prints.

Theory of operation
-------------------
Each game's events are Structs (``games.<game>.rules``); :func:`describe` turns one into lines
of plain English, with cards named the way players say them ("Queen 7", "10♦") rather than by
their codes. Seats are "seat N" counted from 1, as the browser shows them, or the players' names
when the record names them (``names``: seat to name). Nothing here changes
or checks a game: replaying and verifying stay in ``registry``; this is only wording. Events
that only repeat what the previous line said (BlackDrez ``turn``) give no line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.games.blackjack_piles import rules as blackjack_piles
from blackdrez.games.blue_jacket import rules as blue_jacket
from blackdrez.games.cards import FIGURE_NAMES

SUIT_SYMBOLS = {"C": "♣", "D": "♦", "H": "♥", "S": "♠"}
RANK_WORDS = {"A": "A", "T": "10", "J": "J", "Q": "Q", "K": "K"}
ROW_PILE = "row {row} pile {pile}"

Names = Mapping[int, str] | None
"""The players' names by seat (a record may name some seats, or none)."""


def pokerdrez_card(code: str) -> str:
    """A PokerDrez card in words: ``"Q7"`` is ``"Queen 7"``."""
    return f"{FIGURE_NAMES[code[0]]} {code[1:]}"


def standard_card(code: str) -> str:
    """A standard card as players write it: ``"TD"`` is ``"10♦"``."""
    return f"{RANK_WORDS.get(code[0], code[0])}{SUIT_SYMBOLS[code[1]]}"


def seat_name(seat: int, names: Names = None) -> str:
    """A seat as its player's name, where ``names`` has it; else as the browser names it
    ("seat N", counted from 1)."""
    name = names.get(seat) if names else None
    return name or f"seat {seat + 1}"


def _cards(cards: Sequence[str], name: Any = pokerdrez_card) -> str:
    return ", ".join(name(card) for card in cards) if cards else "no cards"


def _count(number: int, word: str) -> str:
    return f"{number} {word}{'' if number == 1 else 's'}"


def _seats(seats: Sequence[int], names: Names = None) -> str:
    named = [seat_name(seat, names) for seat in seats]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def _place(place: int) -> str:
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(place if place < 20 else place % 10, "th")
    return f"{place}{suffix}"


# --------------------------------------------------------------------------- BlackDrez


def _blackdrez(event: Any, names: Names = None) -> list[str]:
    def who(seat: int) -> str:
        return seat_name(seat, names)

    match event:
        case blackdrez.RoundStarted():
            lines = [
                f"Round {event.round}: {who(event.dealer)} deals "
                f"({_count(event.stock, 'card')} left in the stock)"
            ]
            for seat in event.seats:
                lines.append(
                    f"  {who(seat)} gets {_cards(event.hands[seat])}: {event.values[seat]}"
                )
            return lines
        case blackdrez.HitCard():
            value = f"{event.value}, bust" if event.value > blackdrez.ELEVEN else str(event.value)
            return [f"  {who(event.seat)} hits {pokerdrez_card(event.card)}: {value}"]
        case blackdrez.Bust():
            return [f"  {who(event.seat)} is out of the round; the cards stay on the table"]
        case blackdrez.Withdrew():
            return [
                f"  {who(event.seat)} withdraws, keeping {_cards(event.kept)}; "
                f"{_count(len(event.left), 'card')} {'stays' if len(event.left) == 1 else 'stay'} "
                "on the table"
            ]
        case blackdrez.Stood():
            return [f"  {who(event.seat)} stands"]
        case blackdrez.Turn():
            return []
        case blackdrez.RoundWon():
            how = "with 11" if event.reason == "eleven" else "as the last player in the round"
            return [
                f"  {who(event.seat)} wins the round {how} and takes "
                f"{_count(len(event.cards), 'card')}"
            ]
        case blackdrez.PotSplit():
            how = "several 11s on the deal" if event.reason == "eleven" else "everyone stood"
            shares = "; ".join(
                f"{who(seat)} takes {_count(len(share), 'card')}"
                for seat, share in zip(event.winners, event.shares, strict=True)
            )
            carry = (
                f"; {_count(len(event.carry_over), 'card')} carried over to the next round"
                if event.carry_over
                else ""
            )
            return [f"  The pot is split ({how}): {shares}{carry}"]
        case blackdrez.GameOver():
            result = event.result
            why = (
                "the stock could not deal another round"
                if result.reason == "stock"
                else "the last round was played"
            )
            lines = [f"Game over after {_count(result.rounds, 'round')} ({why})"]
            for place in result.ranking:
                shared = " (shared)" if len(place.seats) > 1 else ""
                lines.append(
                    f"  {_place(place.place)}{shared}: {_seats(place.seats, names)} with "
                    f"{_count(place.cards, 'card')}"
                )
            if event.set_aside:
                lines.append(f"  {_count(len(event.set_aside), 'card')} set aside")
            return lines
    return [f"  {type(event).__name__}"]


# --------------------------------------------------------------------------- Blackjack Piles


def _piles(event: Any, names: Names = None) -> list[str]:
    name = standard_card
    match event:
        case blackjack_piles.RoundStarted():
            rules = event.rules
            cap = "no cap" if rules.cap is None else f"at most {rules.cap} cards a pile"
            stock = "may" if rules.stock_in_hand else "may not"
            return [
                f"Round {event.round}: {rules.piles} piles, {cap}; the stock's top {stock} "
                f"join a hand. Stock top {name(event.stock_top)}"
            ]
        case blackjack_piles.Placed():
            return [f"  place {name(event.card)} on pile {event.pile + 1}"]
        case blackjack_piles.Cashed():
            return [
                f"  cash {' + '.join(name(card) for card in event.cards)} = {event.total} "
                f"(hand {event.hands})"
            ]
        case blackjack_piles.Moved():
            return [
                f"  move {name(event.card)} from pile {event.source + 1} to pile {event.target + 1}"
            ]
        case blackjack_piles.RoundEnded():
            result = event.result
            by = {"player": "by the player", "auto": "with nothing left to play"}
            how = by.get(event.ended_by, "by resigning")
            outcome = "passed" if result.passed else "not passed"
            return [
                f"  Round {result.round} ended {how}: {_count(result.hands, 'hand')}, "
                f"{result.left} left, bonus {result.bonus}, score {result.score} ({outcome})"
            ]
        case blackjack_piles.GameOver():
            return [f"Game over: final score {event.score}"]
    return [f"  {type(event).__name__}"]


# --------------------------------------------------------------------------- Blue Jacket


def location(code: str) -> str:
    """A Blue Jacket location in words: ``"r1.3"``, ``"b2"``, ``"aces"``."""
    if code == "aces":
        return "the Aces pile"
    if code.startswith("b"):
        return f"bottom pile {code[1:]}"
    row, pile = code[1:].split(".")
    return ROW_PILE.format(row=row, pile=pile)


def _blue_jacket(event: Any, names: Names = None) -> list[str]:
    name = standard_card
    match event:
        case blue_jacket.Moved():
            return [
                f"  move {name(event.card)} from {location(event.source)} to "
                f"{location(event.target)} (score {event.score})"
            ]
        case blue_jacket.Interchanged():
            return [
                f"  interchange {name(event.card_a)} ({location(event.a)}) and "
                f"{name(event.card_b)} ({location(event.b)}) (score {event.score})"
            ]
        case blue_jacket.Dealt():
            return [
                f"  deal {' '.join(name(card) for card in event.cards)} "
                f"({_count(event.stock_count, 'card')} left in the stock)"
            ]
        case blue_jacket.NoProgress():
            return [
                f"  no sequence of moves can add a card to a foundation: {event.score} is final"
            ]
        case blue_jacket.GameOver():
            why = {"won": "won", "resigned": "resigned", "no_moves": "no move left"}[event.ending]
            return [f"Game over ({why}): final score {event.score}"]
    return [f"  {type(event).__name__}"]


_DESCRIBERS = {"blackdrez": _blackdrez, "blackjack_piles": _piles, "blue_jacket": _blue_jacket}


def opening(game: str, view: Any) -> list[str]:
    """Lines for what the table shows before the first action (a solitaire's layout)."""
    if game == "blackjack_piles":
        rules = view.rules
        return _piles(
            blackjack_piles.RoundStarted(
                round=view.round, rules=rules, stock_top=view.stock_top, stock_count=0
            )
        )
    if game == "blue_jacket":
        lines = ["The deal:"]
        for row, piles in enumerate(view.rows, start=1):
            cards = " ".join(" ".join(standard_card(c) for c in pile) or "-" for pile in piles)
            lines.append(f"  row {row}: {cards}")
        bottom = " ".join(" ".join(standard_card(c) for c in pile) for pile in view.bottom)
        lines.append(f"  bottom row: {bottom}; {_count(view.stock_count, 'card')} in the stock")
        return lines
    return []


def describe(game: str, event: Any, names: Names = None) -> list[str]:
    """Lines of plain English for one event of ``game`` (none for an event that adds nothing),
    its players called by their ``names`` where given; a game with no wording here gets its
    events' types and fields (:func:`_plain`)."""
    describer = _DESCRIBERS.get(game)
    return _plain(event) if describer is None else describer(event, names)


def _plain(event: Any) -> list[str]:
    """An event of a game with no wording here: its type, then its fields as the wire has them
    ("turned: card QH, right True, score 3")."""
    fields = msgspec.to_builtins(event)
    kind = str(fields.pop("type", type(event).__name__)).replace("_", " ")
    details = ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in fields.items())
    return [f"{kind}: {details}" if details else kind]
