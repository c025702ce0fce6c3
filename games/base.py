"""What every engine shares: rejection reasons and the engine contract.

Theory of operation
-------------------
An engine is a plain object holding one game's state. It is created from a config and a seed
(``Engine.new``) or, for tests and replays, from an explicit card order (``Engine.from_order``).
``legal_actions(seat)`` lists what a seat may do now; ``apply(seat, action)`` either raises
:class:`Rejected` (and changes nothing) or changes the state and returns the events that happened.
``view(viewer)`` and ``event_view(event, viewer)`` give what one viewer (a seat number, or ``None``
for a spectator) may see: never an undealt card, never the seed before the game is over.
``dump()`` / ``load()`` serialize the whole state to bytes; the same seed and actions always give
the same bytes. The runtime adds time, connections and storage; the engine knows none of them.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, Self


class Reason(enum.StrEnum):
    """Why an action was rejected. The values are stable: they go on the wire."""

    NOT_YOUR_TURN = "not_your_turn"
    ILLEGAL = "illegal_action"
    GAME_OVER = "game_over"
    NOT_IN_ROUND = "not_in_round"
    BAD_ACTION = "bad_action"


class Rejected(Exception):
    """An action the rules do not allow now. The state is unchanged."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


class Engine(Protocol):
    """The contract every game engine fulfils (see the module docstring)."""

    game: ClassVar[str]
    seed: str | None
    commitment: str | None

    @classmethod
    def new(cls, config: Any, seed: str) -> Self:
        """Start a game from a config and a secret seed."""
        ...

    @classmethod
    def from_order(cls, config: Any, order: Sequence[Any]) -> Self:
        """Start a game from an explicit card order (tests, replays, numbered deals)."""
        ...

    @property
    def over(self) -> bool:
        """Whether the game has ended."""
        ...

    def legal_actions(self, seat: int) -> list[Any]:
        """Every action ``seat`` may take now (empty when it is not that seat's turn)."""
        ...

    def apply(self, seat: int, action: Any) -> list[Any]:
        """Apply ``action`` for ``seat`` and return its events, or raise :class:`Rejected`."""
        ...

    def view(self, viewer: int | None) -> Any:
        """The state as ``viewer`` may see it."""
        ...

    def event_view(self, event: Any, viewer: int | None) -> Any:
        """``event`` as ``viewer`` may see it."""
        ...

    def dump(self) -> bytes:
        """The whole state, serialized deterministically."""
        ...

    @classmethod
    def load(cls, data: bytes) -> Self:
        """Restore a state written by :meth:`dump`."""
        ...
