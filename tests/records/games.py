"""Finished games for the records tests: real bot games, verified like the server's would be."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from blackdrez.games import verify
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.games.records import Record
from blackdrez.server.records.ingest import finished_game
from blackdrez.server.records.model import FinishedGame, SeatPlayer


@functools.cache
def bot_record(game: str, seed: str, seats: int = 4) -> Record:
    """The record of one reference-bot game of ``game`` (BlackDrez with ``seats`` seats)."""
    config = blackdrez.Config(seats=seats) if game == "blackdrez" else None
    return verify.play_bots(game, seed, config)


def finished(
    game_id: str,
    game: str = "blackdrez",
    *,
    seed: str | None = None,
    players: Sequence[str] | None = None,
    bots: Sequence[str] = (),
    ended_at: float = 1_700_000_000.0,
    rated: bool = False,
    seats: int = 4,
    sealed_until: float | None = None,
    private: bool = False,
    arena: str | None = None,
) -> FinishedGame:
    """A verified finished game; ``players[i]`` sits at seat ``i`` (default p0, p1...)."""
    record = bot_record(game, seed or game_id, seats)
    count = seats if game == "blackdrez" else 1
    names = list(players) if players is not None else [f"p{seat}" for seat in range(count)]
    return finished_game(
        game_id=game_id,
        record=record,
        players=[
            SeatPlayer(seat=seat, player=player, name=f"Name {player}", bot=player in bots)
            for seat, player in enumerate(names)
        ],
        started_at=max(0.0, ended_at - 60.0),
        ended_at=ended_at,
        rated=rated,
        table=f"t_{game_id}",
        sealed_until=sealed_until,
        private=private,
        arena=arena,
    )


def seat_order(record: Record) -> list[int]:
    """The record's seats from first place to last (ties in seat order)."""
    result = verify.replay(record).result()
    return [seat for place in result.ranking for seat in place.seats]
