"""The records' data: what the store takes in and gives out, which is also what the API sends.

Every response of the HTTP API is built from these Structs (``api.py`` adds the page wrappers),
so their JSON Schemas (``schema.py``) are the API's contract. Times are seconds since the epoch
(floats with millisecond precision, as the store keeps them); ``player`` is a player id, ``name``
the display name it had.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from blackdrez.games.records import Record as FileRecord

Kind = Literal["humans", "bots", "all"]
"""Whose entries a leaderboard lists."""


class SeatPlayer(msgspec.Struct, frozen=True, kw_only=True):
    """Who sat at a seat of a finished game (the runtime's input to the store)."""

    seat: int
    player: str
    name: str
    bot: bool = False


class PlayerResult(msgspec.Struct, frozen=True, kw_only=True):
    """A seated player and how their game ended for them.

    ``place`` is their place in a BlackDrez ranking (1 is first; equal piles share a place;
    ``None``: not ranked, or a solitaire); ``score`` the BlackDrez pile size or the solitaire
    score; ``won`` is first place in BlackDrez, a win in Blue Jacket, all seven rounds passed in
    Blackjack Piles.
    """

    seat: int
    player: str
    name: str
    bot: bool
    place: int | None
    score: int | None
    won: bool


# The fields every form of a stored game starts with (a finished game to store, its replay).
class GameSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One game in a list: who played, how it ended, when. The record itself is one more GET."""

    id: str
    game: str
    table: str | None
    rated: bool
    started_at: float
    ended_at: float
    players: list[PlayerResult]
    result: dict[str, Any]
    private: bool = False
    """Played at a private table: listed and served only to its players (see docs/api.md)."""
    arena: str | None = None
    """The arena whose pairing made its table (its places scored there), if any."""


def summary_fields(game: GameSummary | GameRecord) -> dict[str, Any]:
    """The :class:`GameSummary` fields of ``game`` (to build another form of it)."""
    return {name: getattr(game, name) for name in GameSummary.__struct_fields__}


class FinishedGame(GameSummary, frozen=True, kw_only=True):
    """A finished, verified game ready to store (built by ``ingest.finished_game``).

    ``id`` is stable for the game (a retried write carries the same id and changes nothing);
    ``result`` is the engine's result as JSON data.
    """

    record: FileRecord
    sealed_until: float | None = None
    """A daily deal's game: its record holds the day's seed, secret until the day ends, so the
    store serves it from then on only (it is written at once all the same)."""
    scored: bool = True
    """A solitaire's score may be its player's best (``best_score``, the leaderboards): a game
    ranked and played without help. A numbered deal (its stock is public), a second try at a
    daily deal, a game with hints or undos is counted as a game, its score is not."""


class GameRecord(FileRecord, kw_only=True):
    """A stored game's record file: every field ``blackdrez verify`` reads, then the metadata.

    Saved to a file as it is, it verifies (``blackdrez verify game.json``) and replays
    (``blackdrez replay game.json``): the record fields come first and the tools ignore the rest.
    """

    id: str
    table: str | None
    rated: bool
    started_at: float
    ended_at: float
    players: list[PlayerResult]
    result: dict[str, Any]
    private: bool = False
    arena: str | None = None


class Rating(msgspec.Struct, frozen=True, kw_only=True):
    """A player's current rating in one game (Weng-Lin; ``ordinal`` is ``mu - 3 sigma``)."""

    mu: float
    sigma: float
    ordinal: float
    display: int
    """The rating as people see it: ``1500 + 20 * ordinal`` rounded, at least 100 (``ratings.
    display``); a new player shows 1500. Show this, not the ordinal."""
    games: int
    """Rated games played."""
    provisional: bool
    """Fewer than 10 rated games: the rating still moves a lot (shown marked)."""


class GameStats(msgspec.Struct, frozen=True, kw_only=True):
    """A player's record in one game: games finished, wins, best score, rating if rated."""

    game: str
    games: int
    wins: int
    best_score: int | None
    """Solitaires: the best score (``None`` for BlackDrez)."""
    rating: Rating | None
    last_played: float
    sealed: int
    """Of ``games``, those not listed yet: daily deals' games, counted at once (games, wins,
    best score) but listed and served only once their UTC day has ended."""
    sealed_until: float | None
    """When the last of the ``sealed`` games is listed (``None`` when there is none)."""


class RatingPoint(msgspec.Struct, frozen=True, kw_only=True):
    """A player's rating after one rated game, with the rating before it; ``display_before``,
    ``display`` and ``change`` are the same as people see them (``change`` is ``display -
    display_before``: "1512 -> 1526 (+14)")."""

    game_id: str
    at: float
    place: int
    mu_before: float
    sigma_before: float
    mu: float
    sigma: float
    ordinal: float
    display_before: int
    display: int
    change: int


class Player(msgspec.Struct, frozen=True, kw_only=True):
    """A player as the records know them."""

    id: str
    name: str
    bot: bool
    """Once a player id has played as a bot it is always labelled a bot."""
    account: bool
    """Whether a password protects this identity (a claimed guest)."""
    first_seen: float
    last_seen: float


class LeaderboardEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One line of a leaderboard: by rating (BlackDrez) or by best score (solitaires)."""

    player: str
    name: str
    bot: bool
    rating: Rating | None
    best_score: int | None


class Account(msgspec.Struct, frozen=True, kw_only=True):
    """A claimed identity as stored (never sent: it holds the password hash)."""

    player: str
    name: str
    password_hash: str
    token_generation: int
