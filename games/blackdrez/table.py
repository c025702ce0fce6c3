"""BlackDrez as the rest of the project sees it: the table glue and the tools' facts.

A BlackDrez table is created by a host with ``TableOptions`` (2 to 8 seats, decks, rounds, turn
timer, round pause). Between rounds the table itself plays ``StartRound`` for everyone seated
(newcomers named, so the engine deals them in), and ``EndGame`` when fewer than two can play. A
player who leaves mid-game plays nothing at once: the turn timer plays their default action.
"""

from __future__ import annotations

from typing import Any

from blackdrez.games.blackdrez import bots, rules
from blackdrez.games.cards import pokerdrez_deck
from blackdrez.games.spec import GameSpec, and_words


class BlackDrezSpec(GameSpec):
    """BlackDrez: the multiplayer table game."""

    name = "blackdrez"
    display_name = "BlackDrez"
    solitaire = False
    engine = rules.BlackDrez
    config = rules.Config
    action = rules.Action
    event = rules.Event
    view = rules.View
    strategies = bots.STRATEGIES
    min_players = 2
    rated = True
    bot_names = bots.BOT_NAMES
    strategy_labels = bots.STRATEGY_LABELS

    def deck(self, config: Any) -> list[str]:
        return pokerdrez_deck(config.deck_count)

    def action_words(self, action: Any) -> str:
        match action:
            case rules.StartRound(seats=seats):
                names = [f"seat {seat + 1}" for seat in seats]
                return f"start a round with {and_words(names)}" if names else "start a round"
            case rules.EndGame():
                return "end the game"
            case rules.Hit():
                return "hit"
            case rules.Withdraw():
                return "withdraw"
            case rules.Stand():
                return "stand"
        return super().action_words(action)

    def bot_turn(self, engine: Any) -> tuple[int, Any]:
        if engine.state.phase == "between_rounds":
            everyone = list(range(engine.state.config.seats))
            return rules.SYSTEM, rules.StartRound(seats=everyone)
        return engine.state.to_act, None

    def seat_count(self, options: Any) -> int:
        return options.seats

    def engine_config(self, options: Any) -> rules.Config:
        return rules.Config(seats=options.seats, decks=options.decks, max_rounds=options.max_rounds)

    def system_action(
        self, engine: Any, seats: list[int], newcomers: list[int]
    ) -> tuple[int, Any] | None:
        if not self.between_rounds(engine) or len(seats) < 2:
            return None
        fresh = [seat for seat in newcomers if seat in seats]
        return rules.SYSTEM, rules.StartRound(seats=seats, newcomers=fresh)

    def end_game_action(self, engine: Any) -> tuple[int, Any]:
        return rules.SYSTEM, rules.EndGame()

    def between_rounds(self, engine: Any) -> bool:
        return engine.state.phase == "between_rounds"

    def in_round(self, engine: Any, seat: int) -> bool:
        return engine.state.phase == "playing" and engine.state.status[seat] in (
            "playing",
            "stood",
        )

    def has_played(self, engine: Any, seat: int) -> bool:
        return bool(engine.state.played[seat])

    def round_pause(self, options: Any) -> float:
        return options.round_pause_seconds

    def turn_seconds(self, options: Any) -> float | None:
        return options.turn_seconds

    def leave_action(self, engine: Any) -> Any:
        return None

    def outcome(self, result: Any, seat: int) -> tuple[int | None, int | None, bool]:
        for place in result.ranking:
            if seat in place.seats:
                return place.place, place.cards, place.place == 1
        return None, None, False

    def record_seats(self, engine: Any) -> int:
        return engine.state.config.seats
