"""Higher or Lower: a one-player card game, the fourth game that proves a game is one folder.

Theory of operation
-------------------
A standard deck is shuffled from the seed (context ``"deck"``); its first card is turned up.
The player says whether the next card ranks ``higher`` or ``lower`` (Ace low, King high); the
next card is turned up. A right guess scores a point, a wrong one (a tie is wrong too) ends the
game; ``stop`` ends it keeping the score. After :attr:`Config.guesses` right guesses the game is
won. Phases and the actions they allow (one player, seat 0)::

    phase     higher   lower   stop
    playing   yes      yes     yes
    over      no       no      no

Nothing is hidden but the undealt cards, so every viewer sees the same view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Self

import msgspec

from blackdrez.games.base import Reason, Rejected
from blackdrez.games.cards import rank_of, standard_deck
from blackdrez.games.shuffle import commitment, shuffled


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``guesses``: right guesses that win the game."""

    guesses: int = 5

    def __post_init__(self) -> None:
        if not isinstance(self.guesses, int) or not 1 <= self.guesses <= 51:
            raise ValueError("guesses must be an integer from 1 to 51")


class Higher(msgspec.Struct, frozen=True, tag="higher", tag_field="type"):
    """The next card ranks higher than the one showing."""


class Lower(msgspec.Struct, frozen=True, tag="lower", tag_field="type"):
    """The next card ranks lower than the one showing."""


class Stop(msgspec.Struct, frozen=True, tag="stop", tag_field="type"):
    """End the game now, keeping the score."""


Action = Higher | Lower | Stop


class Turned(msgspec.Struct, frozen=True, kw_only=True, tag="turned", tag_field="type"):
    """``card`` was turned up; ``right`` says whether the guess was; ``score`` after it."""

    card: str
    right: bool
    score: int


class GameOver(msgspec.Struct, frozen=True, kw_only=True, tag="game_over", tag_field="type"):
    """The game ended; the seed is revealed."""

    score: int
    won: bool
    seed: str | None


Event = Turned | GameOver


class View(msgspec.Struct, frozen=True, kw_only=True):
    """What the player (and any spectator) sees: the cards turned up, the last one showing."""

    card: str
    turned: list[str]
    score: int
    left: int
    over: bool
    won: bool
    commitment: str | None
    seed: str | None


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a finished game."""

    score: int
    won: bool


class State(msgspec.Struct, kw_only=True):
    """The whole game state; its msgpack encoding is the dump."""

    config: Config
    seed: str | None
    commitment: str | None
    order: list[str]
    revealed: int
    score: int
    over: bool
    won: bool


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(State)


class HigherOrLower:
    """One game of Higher or Lower (see the module docstring)."""

    game: ClassVar[str] = "higher_or_lower"

    def __init__(self, state: State) -> None:
        self._s = state

    @classmethod
    def deal_order(cls, config: Config, seed: str) -> list[list[str]]:
        """The deck as ``seed`` shuffles it, top card first."""
        return [shuffled(standard_deck(), seed, "deck")]

    @classmethod
    def new(cls, config: Config, seed: str) -> Self:
        """Start a game whose deck comes from ``seed``."""
        return cls._start(config, cls.deal_order(config, seed)[0], seed)

    @classmethod
    def from_order(cls, config: Config, order: Sequence[str]) -> Self:
        """Start a game from an explicit order of the 52 cards."""
        if sorted(order) != sorted(standard_deck()):
            raise ValueError("the order must hold exactly one standard 52-card deck")
        return cls._start(config, list(order), None)

    @classmethod
    def _start(cls, config: Config, order: list[str], seed: str | None) -> Self:
        digest = commitment(seed) if seed is not None else None
        return cls(
            State(
                config=config,
                seed=seed,
                commitment=digest,
                order=order,
                revealed=1,
                score=0,
                over=False,
                won=False,
            )
        )

    @property
    def seed(self) -> str | None:
        """The game's seed (``None`` when built from a card order)."""
        return self._s.seed

    @property
    def commitment(self) -> str | None:
        """SHA-256 of the seed, published before the first card."""
        return self._s.commitment

    @property
    def over(self) -> bool:
        """Whether the game has ended."""
        return self._s.over

    @property
    def score(self) -> int:
        """Right guesses so far."""
        return self._s.score

    def dealt(self) -> list[list[str]]:
        """The cards turned up so far, in deal order."""
        return [self._s.order[: self._s.revealed]]

    def legal_actions(self, seat: int) -> list[Action]:
        """Higher, lower and stop for seat 0 while the game runs."""
        if seat != 0 or self._s.over:
            return []
        return [Higher(), Lower(), Stop()]

    def default_action(self, seat: int) -> Action | None:
        """``None``: no turn timer."""
        return None

    def apply(self, seat: int, action: Any) -> list[Event]:
        """Apply ``action`` for ``seat`` and return the events, or raise :class:`Rejected`."""
        s = self._s
        if not isinstance(action, Higher | Lower | Stop):
            raise Rejected(Reason.BAD_ACTION, f"not a Higher or Lower action: {action!r}")
        if seat != 0:
            raise Rejected(Reason.NOT_YOUR_TURN, "Higher or Lower has one player, seat 0")
        if s.over:
            raise Rejected(Reason.GAME_OVER, "the game is over")
        if isinstance(action, Stop):
            return [self._finish()]
        showing, card = s.order[s.revealed - 1], s.order[s.revealed]
        s.revealed += 1
        step = rank_of(card) - rank_of(showing)
        right = step > 0 if isinstance(action, Higher) else step < 0
        s.score += right
        events: list[Event] = [Turned(card=card, right=right, score=s.score)]
        if not right or s.score == s.config.guesses:
            s.won = right
            events.append(self._finish())
        return events

    def _finish(self) -> GameOver:
        self._s.over = True
        return GameOver(score=self._s.score, won=self._s.won, seed=self._s.seed)

    def view(self, viewer: int | None) -> View:
        """The game as anyone sees it."""
        s = self._s
        return View(
            card=s.order[s.revealed - 1],
            turned=s.order[: s.revealed],
            score=s.score,
            left=s.config.guesses - s.score,
            over=s.over,
            won=s.won,
            commitment=s.commitment,
            seed=s.seed if s.over else None,
        )

    def event_view(self, event: Event, viewer: int | None) -> Event:
        """Events carry no hidden card: unchanged."""
        return event

    def result(self) -> Result:
        """The final outcome; raises ``ValueError`` while the game runs."""
        if not self._s.over:
            raise ValueError("the game is not over")
        return Result(score=self._s.score, won=self._s.won)

    def dump(self) -> bytes:
        """The whole state as msgpack bytes (deterministic)."""
        return _ENCODER.encode(self._s)

    @classmethod
    def load(cls, data: bytes) -> Self:
        """Restore a game from :meth:`dump` bytes."""
        return cls(_DECODER.decode(data))
