"""What the runtime needs to know about each game, beyond the engine contract.

An adapter is the thin, game-specific glue between a :class:`~server.room.Room` and an engine: how
many seats, how a game is created from table options, which system actions the table plays itself
(BlackDrez: starting each round, and ending the game when fewer than two can play), and whether
it is a solitaire (hints, undo and leaderboards: ``server.assist``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from protocol import v1
from server.games import blackdrez, blackjack_piles, blue_jacket


class GameAdapter:
    """Defaults shared by the solitaires; BlackDrez overrides the multiplayer parts."""

    name: ClassVar[str]
    engine_module: ClassVar[Any]
    engine: ClassVar[Any]
    action_type: ClassVar[Any]
    min_players: ClassVar[int] = 1
    solitaire: ClassVar[bool] = True
    """One player, no turns: hints, undo and ranked results (``server.assist``) apply."""
    same_view_for_all: ClassVar[bool] = True
    """Every viewer of this game sees the same view and events (all three games: every card a
    player may see is face up for all). Lets the room build one copy instead of one per seat;
    a game with private hands sets it False and gets per-seat copies where they differ."""

    def seat_count(self, options: v1.TableOptions) -> int:
        """How many seats a table of this game has."""
        return 1

    def create(self, options: v1.TableOptions, seed: str) -> Any:
        """A new engine for a game at a table with these options."""
        return self.engine.new(self.engine_config(options), seed)

    def engine_config(self, options: v1.TableOptions) -> Any:
        """The engine's config for these table options."""
        return self.engine.Config() if hasattr(self.engine, "Config") else None

    def deal_seed(self, deal: int) -> str:
        """The public seed of numbered deal ``deal``: anyone can replay it."""
        return f"{self.name}:deal:{deal}"

    def system_action(self, engine: Any, seats: list[int], newcomers: list[int]) -> Any:
        """``(seat, action)`` the table plays itself now, or ``None``."""
        return None

    def end_game_action(self, engine: Any) -> tuple[int, Any]:
        """``(seat, action)`` that ends the game between rounds when fewer than
        ``min_players`` can play (only games with rounds between which players come and go)."""
        raise NotImplementedError(f"{self.name} never waits for players between rounds")

    def leave_action(self, engine: Any) -> Any:
        """What a player who leaves mid-game plays at once (solitaires: resign), or ``None`` to
        play the default action at each of their turns instead (BlackDrez)."""
        return self.engine_module.Resign()

    def between_rounds(self, engine: Any) -> bool:
        """Whether the game waits for the table to start the next round."""
        return False

    def in_round(self, engine: Any, seat: int) -> bool:
        """Whether ``seat`` takes part in the current round."""
        return not engine.over

    def round_number(self, engine: Any) -> int:
        """The current round (0 before the first)."""
        return getattr(getattr(engine, "state", None), "round", 0)

    def round_pause(self, options: v1.TableOptions) -> float:
        """Seconds between a round's end and the next round's deal."""
        return 0.0

    def turn_seconds(self, options: v1.TableOptions) -> float | None:
        """The turn timer, or ``None`` for no timer (solitaires)."""
        return None


class BlackDrezAdapter(GameAdapter):
    name = "blackdrez"
    engine_module = blackdrez
    engine = blackdrez.BlackDrez
    action_type = blackdrez.Action
    min_players = 2
    solitaire = False

    def seat_count(self, options: v1.TableOptions) -> int:
        return options.seats

    def engine_config(self, options: v1.TableOptions) -> blackdrez.Config:
        return blackdrez.Config(
            seats=options.seats, decks=options.decks, max_rounds=options.max_rounds
        )

    def system_action(
        self, engine: Any, seats: list[int], newcomers: list[int]
    ) -> tuple[int, Any] | None:
        if not self.between_rounds(engine) or len(seats) < 2:
            return None
        fresh = [seat for seat in newcomers if seat in seats]
        return blackdrez.SYSTEM, blackdrez.StartRound(seats=seats, newcomers=fresh)

    def end_game_action(self, engine: Any) -> tuple[int, Any]:
        return blackdrez.SYSTEM, blackdrez.EndGame()

    def between_rounds(self, engine: Any) -> bool:
        return engine.state.phase == "between_rounds"

    def in_round(self, engine: Any, seat: int) -> bool:
        return engine.state.phase == "playing" and engine.state.status[seat] in (
            "playing",
            "stood",
        )

    def round_pause(self, options: v1.TableOptions) -> float:
        return options.round_pause_seconds

    def turn_seconds(self, options: v1.TableOptions) -> float | None:
        return options.turn_seconds

    def leave_action(self, engine: Any) -> Any:
        return None


class BlackjackPilesAdapter(GameAdapter):
    name = "blackjack_piles"
    engine_module = blackjack_piles
    engine = blackjack_piles.BlackjackPiles
    action_type = blackjack_piles.Action

    def engine_config(self, options: v1.TableOptions) -> blackjack_piles.Config:
        return blackjack_piles.Config()


class BlueJacketAdapter(GameAdapter):
    name = "blue_jacket"
    engine_module = blue_jacket
    engine = blue_jacket.BlueJacket
    action_type = blue_jacket.Action

    def engine_config(self, options: v1.TableOptions) -> Any:
        return blue_jacket.Config()


ADAPTERS: dict[str, GameAdapter] = {
    adapter.name: adapter
    for adapter in (BlackDrezAdapter(), BlackjackPilesAdapter(), BlueJacketAdapter())
}
