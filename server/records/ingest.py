"""Turn a finished game's record into what the store writes: verified, with its result per player.

Theory of operation
-------------------
:func:`finished_game` is pure (no I/O) and CPU-bound: it replays the record with the project's
own verifier (``verify.verification``: the seed matches the commitment, every action replays,
the dealt cards are the shuffle's, the game is over) and reads the result from the replayed game,
so the store only ever holds records that ``blackdrez verify`` accepts and results that follow
from them, whatever the caller believed. It costs one replay (about 1 ms for a BlackDrez game,
5 ms for a solitaire on this machine): call it off the event loop's hot path, for example with
``asyncio.to_thread``.

Bad input raises :class:`InvalidGame` naming what is wrong; the problem is permanent (retrying the
same game cannot help), unlike a database error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import msgspec

from blackdrez.games import GAMES, verify
from blackdrez.games.records import Record as FileRecord
from blackdrez.server.records.model import FinishedGame, PlayerResult, SeatPlayer
from blackdrez.server.records.ratings import RATED_GAMES

GAME_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""What a game id may be: it goes into URLs and cursors unescaped."""

MAX_PLAYER_ID = 64
MAX_NAME = 64


class InvalidGame(ValueError):
    """A game the store refuses: an unverifiable record or inconsistent players. Permanent."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message if not problems else f"{message}: {'; '.join(problems)}")
        self.problems = list(problems)


def finished_game(
    *,
    game_id: str,
    record: FileRecord,
    players: Sequence[SeatPlayer],
    started_at: float,
    ended_at: float,
    rated: bool = False,
    table: str | None = None,
    sealed_until: float | None = None,
    scored: bool = True,
    private: bool = False,
    arena: str | None = None,
) -> FinishedGame:
    """A verified :class:`FinishedGame` from a record and who sat where; raises ``InvalidGame``.

    ``players`` names the occupant of each seat at the end of the game (a seat nobody holds is
    left out); ``rated`` is the table's choice and is only allowed for a rated game;
    ``sealed_until``: a daily deal's game is served only from then on (its day's end);
    ``scored``: whether a solitaire's score may be its player's best (see ``FinishedGame``);
    ``private``: played at a private table (only its players may read it);
    ``arena``: the arena whose pairing made the table.
    """
    if not isinstance(game_id, str) or not GAME_ID.fullmatch(game_id):
        raise InvalidGame(f"a game id is 1 to 128 of A-Z a-z 0-9 _ . : -, not {game_id!r}")
    if not (math.isfinite(started_at) and math.isfinite(ended_at) and started_at >= 0):
        raise InvalidGame(f"times must be finite and not negative: {started_at}, {ended_at}")
    if ended_at < started_at:
        raise InvalidGame(f"the game ended ({ended_at}) before it started ({started_at})")
    if rated and record.game not in RATED_GAMES:
        raise InvalidGame(f"only {', '.join(sorted(RATED_GAMES))} games are rated")
    checked = verify.verification(record)
    if checked.problems:
        raise InvalidGame("the record does not verify", checked.problems)
    engine = checked.engine
    spec = GAMES[record.game]
    _check_players(players, spec.record_seats(engine))
    result = engine.result()
    results = []
    for p in sorted(players, key=lambda p: p.seat):
        place, score, won = spec.outcome(result, p.seat)
        results.append(
            PlayerResult(
                seat=p.seat,
                player=p.player,
                name=p.name,
                bot=p.bot,
                place=place,
                score=score,
                won=won,
            )
        )
    return FinishedGame(
        id=game_id,
        game=record.game,
        table=table,
        rated=rated,
        started_at=started_at,
        ended_at=ended_at,
        players=results,
        result=msgspec.to_builtins(result),
        record=record,
        sealed_until=sealed_until,
        scored=scored,
        private=private,
        arena=arena,
    )


def _check_players(players: Sequence[SeatPlayer], seats: int) -> None:
    if not players:
        raise InvalidGame("a finished game needs at least one player")
    seen_seats: set[int] = set()
    seen_players: set[str] = set()
    for p in players:
        if type(p.seat) is not int or not 0 <= p.seat < seats:
            raise InvalidGame(f"seat {p.seat!r} is not a seat of this game (0 to {seats - 1})")
        if not isinstance(p.player, str) or not 0 < len(p.player) <= MAX_PLAYER_ID:
            raise InvalidGame(f"a player id is 1 to {MAX_PLAYER_ID} characters: {p.player!r}")
        if not isinstance(p.name, str) or not 0 < len(p.name) <= MAX_NAME:
            raise InvalidGame(f"a name is 1 to {MAX_NAME} characters: {p.name!r}")
        if p.seat in seen_seats:
            raise InvalidGame(f"seat {p.seat} is named twice")
        if p.player in seen_players:
            raise InvalidGame(f"player {p.player!r} holds two seats")
        seen_seats.add(p.seat)
        seen_players.add(p.player)
