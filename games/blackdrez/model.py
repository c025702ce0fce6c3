"""BlackDrez's data: the table's settings, the actions, the events, the state and the views, as
msgspec Structs (the wire and log forms of each are theirs).

Theory of operation
-------------------
The rules (:mod:`blackdrez.games.blackdrez.rules`) act on these and re-export every name, so
``rules.Config`` and the rest are where they always were. They live apart from the rules so that
the rules can be compiled (``tools/compile.py``, mypyc) while these stay plain Python classes:
msgspec reads a Struct's class keywords (``tag``, ``kw_only``, ``frozen``) when the class is
made, and mypyc does not pass them on.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Phase = Literal["between_rounds", "playing", "over"]
Status = Literal["out", "playing", "stood", "bust", "withdrawn", "winner", "lost"]


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A BlackDrez table's settings.

    ``decks`` ``None`` means one deck for up to four seats and two for five to eight;
    ``first_dealer`` ``None`` means drawn from the seed (seat 0 for
    :meth:`BlackDrez.from_order`).
    """

    seats: int = 4
    decks: int | None = None
    max_rounds: int | None = None
    first_dealer: int | None = None

    def __post_init__(self) -> None:
        if type(self.seats) is not int or not 2 <= self.seats <= 8:
            raise ValueError(f"seats must be an integer from 2 to 8, not {self.seats!r}")
        if self.decks is not None and (type(self.decks) is not int or self.decks not in (1, 2)):
            raise ValueError(f"decks must be 1, 2 or None, not {self.decks!r}")
        if self.max_rounds is not None and (
            type(self.max_rounds) is not int or self.max_rounds < 1
        ):
            raise ValueError(f"max_rounds must be None or at least 1, not {self.max_rounds!r}")
        if self.first_dealer is not None and (
            type(self.first_dealer) is not int or not 0 <= self.first_dealer < self.seats
        ):
            raise ValueError(
                f"first_dealer must be None or a seat from 0 to {self.seats - 1}, "
                f"not {self.first_dealer!r}"
            )

    @property
    def deck_count(self) -> int:
        """The number of decks in play, with the default resolved."""
        if self.decks is not None:
            return self.decks
        return 1 if self.seats <= 4 else 2


# Actions


class StartRound(msgspec.Struct, frozen=True, tag="start_round", tag_field="type"):
    """Start a round with ``seats`` (SYSTEM only); ``newcomers`` start with an empty pile."""

    seats: list[int]
    newcomers: list[int] = []


class EndGame(msgspec.Struct, frozen=True, tag="end_game", tag_field="type"):
    """End the game now (SYSTEM only, between rounds): fewer than two seats can play."""


class Hit(msgspec.Struct, frozen=True, tag="hit", tag_field="type"):
    """Take the top card of the stock."""


class Withdraw(msgspec.Struct, frozen=True, tag="withdraw", tag_field="type"):
    """Leave the round keeping half of the hand (rounded down)."""


class Stand(msgspec.Struct, frozen=True, tag="stand", tag_field="type"):
    """Pass the turn right; only when every hand in the round is level."""


Action = StartRound | EndGame | Hit | Withdraw | Stand


# Events


class Place(msgspec.Struct, frozen=True):
    """One place of the final ranking: the seats sharing it and their pile size."""

    place: int
    seats: list[int]
    cards: int


class Result(msgspec.Struct, frozen=True):
    """The final outcome: the ranking by pile size, rounds played and why the game ended
    (``stock`` too short for another round, ``max_rounds`` played, or ``players``: fewer than
    two seats could play the next round)."""

    ranking: list[Place]
    rounds: int
    reason: Literal["stock", "max_rounds", "players"]


class RoundStarted(msgspec.Struct, frozen=True, tag="round_started", tag_field="type"):
    """A round began: ``hands[seat]`` is what each seat was dealt (empty when sitting out)."""

    round: int
    seats: list[int]
    dealer: int
    hands: list[list[str]]
    values: list[int | None]
    stock: int


class HitCard(msgspec.Struct, frozen=True, tag="hit", tag_field="type"):
    """``seat`` took ``card``; ``value`` is the hand's new value (over 11: bust)."""

    seat: int
    card: str
    value: int
    stock: int


class Bust(msgspec.Struct, frozen=True, tag="bust", tag_field="type"):
    """``seat`` went over 11; its ``cards`` moved to the pot."""

    seat: int
    value: int
    cards: list[str]


class Withdrew(msgspec.Struct, frozen=True, tag="withdrew", tag_field="type"):
    """``seat`` left the round: ``kept`` went to its pile, ``left`` to the pot."""

    seat: int
    kept: list[str]
    left: list[str]


class Stood(msgspec.Struct, frozen=True, tag="stood", tag_field="type"):
    """``seat`` stood on level hands."""

    seat: int


class Turn(msgspec.Struct, frozen=True, tag="turn", tag_field="type"):
    """``seat`` is to act."""

    seat: int


class RoundWon(msgspec.Struct, frozen=True, tag="round_won", tag_field="type"):
    """``seat`` won the round (``eleven`` or ``last_player``) and took ``cards`` to its pile."""

    seat: int
    reason: Literal["eleven", "last_player"]
    cards: list[str]


class PotSplit(msgspec.Struct, frozen=True, tag="pot_split", tag_field="type"):
    """The pot was shared: ``shares[i]`` went to ``winners[i]``; ``carry_over`` stays."""

    winners: list[int]
    reason: Literal["eleven", "stand"]
    shares: list[list[str]]
    carry_over: list[str]


class GameOver(msgspec.Struct, frozen=True, tag="game_over", tag_field="type"):
    """The game ended: the ``result``, the revealed ``seed`` and the cards set aside."""

    result: Result
    seed: str | None
    set_aside: list[str]


Event = RoundStarted | HitCard | Bust | Withdrew | Stood | Turn | RoundWon | PotSplit | GameOver


# State and view


class State(msgspec.Struct, kw_only=True):
    """Everything about one game; ``msgspec.msgpack.encode(state)`` is the dump.

    The stock is ``order[drawn:]``; ``values[seat]`` caches ``hand_value(hands[seat])``.
    """

    config: Config
    seed: str | None
    commitment: str | None
    order: list[str]
    drawn: int = 0
    phase: Phase = "between_rounds"
    round: int = 0
    dealer: int = 0
    to_act: int | None = None
    last_actor: int | None = None
    status: list[Status]
    hands: list[list[str]]
    values: list[int]
    piles: list[list[str]]
    played: list[bool]
    pot: list[str] = []
    carry_over: list[str] = []
    set_aside: list[str] = []
    result: Result | None = None


class SeatView(msgspec.Struct, frozen=True):
    """One seat as everyone sees it; ``value`` is ``None`` for an empty hand."""

    seat: int
    in_round: bool
    status: Status
    hand: list[str]
    value: int | None
    pile: list[str]


class View(msgspec.Struct, frozen=True, kw_only=True):
    """The game as every viewer sees it (all cards are face up; the stock is a count). It names
    no viewer, so one encoding serves every seat and spectator alike.

    ``dealer`` is the dealer of the round in play or, between rounds, of the round just played
    (the first dealer before round 1). ``next_dealer`` is the seat due to deal the next round
    (if it plays it; otherwise the first playing seat to its right), ``None`` while a round is
    played and once the game is over. ``seats[i].in_round`` and ``status`` describe the current
    or last round.
    """

    game: str = "blackdrez"
    round: int
    phase: Phase
    dealer: int
    next_dealer: int | None
    to_act: int | None
    last_actor: int | None
    seats: list[SeatView]
    pot: list[str]
    carry_over: list[str]
    set_aside: list[str]
    stock: int
    decks: int
    commitment: str | None
    seed: str | None
    result: Result | None
