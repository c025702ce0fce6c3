"""The records store: finished games, players, stats, ratings and accounts in one database.

Theory of operation
-------------------
:meth:`RecordsStore.put_game` writes one :class:`~blackdrez.server.records.model.FinishedGame` in
one
transaction (a write script, ``_put_game``: see ``db.py``; a handful of multi-row statements
whatever the number of players). The game row goes first, with ``INSERT ... ON CONFLICT (id)
DO NOTHING``; if the id was already there the write stops and changes nothing (a retried write
after a crash, or two nodes writing the same game, never counts a game twice). Else it goes on
to the players, the per-player stats and, for a rated BlackDrez game with two or more ranked
players, the ratings: read the current ratings (PostgreSQL: ``FOR UPDATE``, rows locked in
player order so that concurrent games with common players queue instead of losing an update or
deadlocking; SQLite has one writer at a time), compute the new ones (``ratings.rate``), write
them and their history. Ratings therefore follow the order in which games are stored, which is
the order they ended except after a retried write.

Every read is bounded: lists take a ``limit`` (at most :data:`MAX_LIMIT`) and a keyset cursor
(the last row's sort key) instead of an offset, so the tenth page costs what the first does, and
each list query is one range of one index (see ``migrations.py``). A cursor is opaque text made
here and parsed here (:class:`InvalidCursor` for anything else).

The store also keeps accounts (claimed identities) for ``accounts.py``; it never sees a password,
only the hash.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from blackdrez.games.records import encode_record
from blackdrez.server.records.db import Database, Row, Script, open_database, values
from blackdrez.server.records.migrations import migrate
from blackdrez.server.records.model import (
    Account,
    FinishedGame,
    GameRecord,
    GameStats,
    GameSummary,
    Kind,
    LeaderboardEntry,
    Player,
    PlayerResult,
    Rating,
    RatingPoint,
)
from blackdrez.server.records.ratings import (
    INITIAL,
    RATED_GAMES,
    change,
    display,
    provisional,
    rate,
)
from blackdrez.server.records.ratings import Rating as Skill

MAX_LIMIT = 100
"""The most rows one list query returns."""
SEALED_WINDOW_MS = 2 * 86_400_000
"""How far back a player's still sealed games are looked for: a daily deal's game is sealed until
its UTC day ends and ended that day (one ending later is not sealed), so it ended less than a day
ago; two days leave room for clocks."""
GENERATIONS_AT_ONCE = 500
"""Players whose token generations one query reads (SQLite takes at most 999 parameters in
old builds)."""


class InvalidCursor(ValueError):
    """A pagination cursor this store did not make."""


class GameIdConflict(Exception):
    """A game id already stored for a different game (another commitment): a caller's bug."""


class NameTaken(Exception):
    """Another account already holds this name (names compare case-folded)."""


class AlreadyClaimed(Exception):
    """This player id already has an account."""


class _Summary(msgspec.Struct, frozen=True):
    """What ``games.summary`` holds."""

    players: list[PlayerResult]
    result: dict[str, Any]


_SUMMARY_ENCODER = msgspec.json.Encoder()
_SUMMARY_DECODER = msgspec.json.Decoder(_Summary)
_RECORD_DECODER = msgspec.json.Decoder(dict[str, Any])


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _seconds(ms: int) -> float:
    return ms / 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


def _check_limit(limit: int) -> None:
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}, not {limit!r}")


# Cursors: "<number>~<text>", the last row's sort key; "~" never occurs in a number. A cursor
# only ever holds what the database gave: a 64-bit integer or a finite float, and text without
# NUL (PostgreSQL's text has none); anything else is not one of ours.

_INT64 = 2**63


def _cursor_number(text: str, kind: type) -> Any:
    number = kind(text)
    if kind is int and not -_INT64 <= number < _INT64:
        raise ValueError(text)
    if kind is float and not math.isfinite(number):
        raise ValueError(text)
    return number


def _cursor(number: float | int, text: str) -> str:
    return f"{number!r}~{text}"


def _parse_cursor(cursor: str, kind: type) -> tuple[Any, str]:
    number, sep, text = cursor.partition("~")
    try:
        if not sep or not text or "\x00" in text:
            raise ValueError
        return _cursor_number(number, kind), text
    except ValueError:
        raise InvalidCursor(f"not a cursor from this API: {cursor!r}") from None


def _scoreboard_cursor(score: int, at: int, player: str) -> str:
    return f"{score}~{at}~{player}"


def _parse_scoreboard_cursor(cursor: str) -> tuple[int, int, str]:
    parts = cursor.split("~", 2)
    try:
        if len(parts) != 3 or not parts[2] or "\x00" in parts[2]:
            raise ValueError
        return _cursor_number(parts[0], int), _cursor_number(parts[1], int), parts[2]
    except ValueError:
        raise InvalidCursor(f"not a cursor from this API: {cursor!r}") from None


def _player(row: Row) -> Player:
    return Player(
        id=row["id"],
        name=row["name"],
        bot=bool(row["bot"]),
        account=bool(row["account"]),
        first_seen=_seconds(row["created_at"]),
        last_seen=_seconds(row["seen_at"]),
    )


def _summary(row: Row) -> GameSummary:
    summary = _SUMMARY_DECODER.decode(row["summary"])
    return GameSummary(
        id=row["id"],
        game=row["game"],
        table=row["table_id"],
        rated=bool(row["rated"]),
        started_at=_seconds(row["started_at"]),
        ended_at=_seconds(row["ended_at"]),
        players=summary.players,
        result=summary.result,
        private=bool(row["private"]),
        arena=row["arena"],
    )


def _rating(row: Row) -> Rating:
    return Rating(
        mu=row["mu"],
        sigma=row["sigma"],
        ordinal=row["ordinal"],
        display=display(row["ordinal"]),
        games=row["games"],
        provisional=provisional(row["games"]),
    )


def _rating_point(row: Row) -> RatingPoint:
    before = Skill(row["mu_before"], row["sigma_before"]).ordinal
    return RatingPoint(
        game_id=row["game_id"],
        at=_seconds(row["at"]),
        place=row["place"],
        mu_before=row["mu_before"],
        sigma_before=row["sigma_before"],
        mu=row["mu"],
        sigma=row["sigma"],
        ordinal=row["ordinal"],
        display_before=display(before),
        display=display(row["ordinal"]),
        change=change(before, row["ordinal"]),
    )


_GAME_COLUMNS = (
    "g.id, g.game, g.table_id, g.rated, g.started_at, g.ended_at, g.summary, g.private, g.arena"
)


def _unsealed(parameter: int) -> str:
    """The condition that game ``g`` may be served at the time given as parameter ``$n``."""
    return f"(g.sealed_until IS NULL OR g.sealed_until <= ${parameter})"


def _readable(parameter: int) -> str:
    """The condition that game ``g`` may be served to the player given as parameter ``$n``
    (``NULL``: anyone): a public game, or a private one they played."""
    return (
        f"(g.private = FALSE OR EXISTS (SELECT 1 FROM game_players v "
        f"WHERE v.game_id = g.id AND v.player = ${parameter}))"
    )


class RecordsStore:
    """Finished games, players, ratings and accounts in one database (see the module docstring)."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock
        """The time that unseals a daily deal's game (the node's clock, in a server)."""

    @classmethod
    async def open(cls, url: str) -> RecordsStore:
        """Connect to the database at ``url`` and bring its schema up to date."""
        db = await open_database(url)
        try:
            await migrate(db)
        except BaseException:
            await db.close()
            raise
        return cls(db)

    async def close(self) -> None:
        """Close the database connections."""
        await self.db.close()

    # ------------------------------------------------------------------ writing games
    async def put_game(self, game: FinishedGame) -> bool:
        """Store a finished game; ``True`` if written now, ``False`` if it was already stored.

        Raises :class:`GameIdConflict` (changing nothing) when the id is stored for another game.
        """
        return await self.db.run(_put_game(game, self.db.dialect == "postgresql"))

    async def put_games(
        self, games: Sequence[FinishedGame]
    ) -> tuple[list[bool | GameIdConflict], Exception | None]:
        """Store ``games`` in order, each as :meth:`put_game` would (a transaction each), in one
        call to the database: for each game stored so far ``True`` (written now), ``False``
        (already stored) or its :class:`GameIdConflict` (nothing changed, the next one goes
        on); and the error that stopped the rest, if one did (``None`` when all were tried)."""
        lock_rows = self.db.dialect == "postgresql"
        return await self.db.run_each([_put_or_conflict(game, lock_rows) for game in games])

    # ------------------------------------------------------------------ reading games
    async def game(self, game_id: str, viewer: str | None = None) -> GameRecord | None:
        """One stored game as its record file plus metadata, or ``None``: also for a private
        game that ``viewer`` (the player asking; ``None``: anyone) did not play."""
        row = await self.db.fetchrow(
            f"SELECT {_GAME_COLUMNS}, g.record FROM games g "
            f"WHERE g.id = $1 AND {_unsealed(2)} AND {_readable(3)}",
            game_id,
            _ms(self.clock()),
            viewer,
        )
        if row is None:
            return None
        summary = _summary(row)
        fields = _RECORD_DECODER.decode(row["record"])
        return msgspec.convert(
            {
                **fields,
                "id": summary.id,
                "table": summary.table,
                "rated": summary.rated,
                "started_at": summary.started_at,
                "ended_at": summary.ended_at,
                "players": msgspec.to_builtins(summary.players),
                "result": summary.result,
                "private": summary.private,
                "arena": summary.arena,
            },
            GameRecord,
        )

    async def games(
        self,
        *,
        player: str | None = None,
        game: str | None = None,
        arena: str | None = None,
        before: str | None = None,
        limit: int = 20,
        viewer: str | None = None,
    ) -> tuple[list[GameSummary], str | None]:
        """Finished games, newest first, optionally of one player, one game, one arena.

        Private games are left out, except from a player's own list (``player == viewer``,
        the player asking). ``before`` is the cursor a previous page returned; returns the page
        and the cursor of the next one (``None``: this was the last page).
        """
        _check_limit(limit)
        conditions: list[str] = []
        args: list[Any] = []
        table = "games g"
        key = "g"
        if player is not None:
            table = "game_players k JOIN games g ON g.id = k.game_id"
            key = "k"
            args.append(player)
            conditions.append(f"k.player = ${len(args)}")
        if arena is not None:  # an arena's games: its index (migration 5), or a player's few
            args.append(arena)
            conditions.append(f"g.arena = ${len(args)}")
        if player is None or player != viewer:  # each list one range of an index (migration 3)
            conditions.append(f"{key}.private = FALSE")
        if game is not None:
            args.append(game)
            conditions.append(f"{key}.game = ${len(args)}")
        args.append(_ms(self.clock()))
        conditions.append(_unsealed(len(args)))
        if before is not None:
            ended, game_id = _parse_cursor(before, int)
            args += [ended, game_id]
            id_column = "k.game_id" if key == "k" else "g.id"
            conditions.append(f"({key}.ended_at, {id_column}) < (${len(args) - 1}, ${len(args)})")
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        order_id = "k.game_id" if key == "k" else "g.id"
        args.append(limit + 1)
        rows = await self.db.fetch(
            f"SELECT {_GAME_COLUMNS} FROM {table} {where} "
            f"ORDER BY {key}.ended_at DESC, {order_id} DESC LIMIT ${len(args)}",
            *args,
        )
        page = [_summary(row) for row in rows[:limit]]
        more = len(rows) > limit
        last = rows[limit - 1] if more else None
        return page, _cursor(last["ended_at"], last["id"]) if last is not None else None

    # ------------------------------------------------------------------ players
    async def player(self, player: str) -> Player | None:
        """A player as the records know them, or ``None``."""
        row = await self.db.fetchrow(
            "SELECT p.id, p.name, p.bot, p.created_at, p.seen_at, "
            "EXISTS (SELECT 1 FROM accounts a WHERE a.player = p.id) AS account "
            "FROM players p WHERE p.id = $1",
            player,
        )
        return None if row is None else _player(row)

    async def stats(self, player: str) -> list[GameStats]:
        """The player's record in each game they finished, by game name; ``sealed`` counts the
        games among them not listed yet (daily deals until their UTC day ends)."""
        now = _ms(self.clock())
        sealed_rows = await self.db.fetch(
            "SELECT k.game, COUNT(*) AS sealed, MAX(g.sealed_until) AS sealed_until "
            "FROM game_players k JOIN games g ON g.id = k.game_id "
            "WHERE k.player = $1 AND k.ended_at > $2 AND g.sealed_until > $3 GROUP BY k.game",
            player,
            now - SEALED_WINDOW_MS,
            now,
        )
        sealed = {row["game"]: row["sealed"] for row in sealed_rows}
        sealed_until = {row["game"]: _seconds(row["sealed_until"]) for row in sealed_rows}
        rows = await self.db.fetch(
            "SELECT s.game, s.games AS played, s.wins, s.best_score, s.last_at, "
            "r.mu, r.sigma, r.ordinal, r.games "
            "FROM player_stats s LEFT JOIN ratings r ON r.player = s.player AND r.game = s.game "
            "WHERE s.player = $1 ORDER BY s.game",
            player,
        )
        return [
            GameStats(
                game=row["game"],
                games=row["played"],
                wins=row["wins"],
                best_score=row["best_score"],
                rating=None if row["mu"] is None else _rating(row),
                last_played=_seconds(row["last_at"]),
                sealed=sealed.get(row["game"], 0),
                sealed_until=sealed_until.get(row["game"]),
            )
            for row in rows
        ]

    async def ratings(self, game: str, players: list[str]) -> dict[str, Rating]:
        """The current ratings in ``game`` of those of ``players`` who have one (at most 8: the
        players at one table)."""
        if not 0 < len(players) <= 8:
            raise ValueError(f"ratings are read for 1 to 8 players, not {len(players)}")
        marks = ", ".join(f"${n}" for n in range(2, len(players) + 2))
        rows = await self.db.fetch(
            "SELECT player, mu, sigma, ordinal, games FROM ratings "
            f"WHERE game = $1 AND player IN ({marks})",
            game,
            *players,
        )
        return {row["player"]: _rating(row) for row in rows}

    async def rating_history(
        self,
        player: str,
        game: str,
        *,
        before: str | None = None,
        limit: int = 20,
        viewer: str | None = None,
    ) -> tuple[list[RatingPoint], str | None]:
        """The player's rating after each rated game of ``game``, newest first; and the cursor.

        A private table's game is left out unless the player asks (``viewer``): its point
        would say when they played it, how it went and, beside the other players' points at
        the same instant, with whom."""
        _check_limit(limit)
        args: list[Any] = [player, game]
        condition = ""
        if before is not None:
            at, game_id = _parse_cursor(before, int)
            args += [at, game_id]
            condition = "AND (at, game_id) < ($3, $4)"
        if viewer != player:
            condition += (
                " AND NOT EXISTS (SELECT 1 FROM games g"
                " WHERE g.id = rating_history.game_id AND g.private = TRUE)"
            )
        args.append(limit + 1)
        rows = await self.db.fetch(
            "SELECT game_id, at, place, mu_before, sigma_before, mu, sigma, ordinal "
            f"FROM rating_history WHERE player = $1 AND game = $2 {condition} "
            f"ORDER BY at DESC, game_id DESC LIMIT ${len(args)}",
            *args,
        )
        points = [_rating_point(row) for row in rows[:limit]]
        last = rows[limit - 1] if len(rows) > limit else None
        return points, _cursor(last["at"], last["game_id"]) if last is not None else None

    # ------------------------------------------------------------------ leaderboards
    async def leaderboard(
        self, game: str, kind: Kind = "all", *, after: str | None = None, limit: int = 20
    ) -> tuple[list[LeaderboardEntry], str | None]:
        """The best players of ``game``, best first: by rating (rated games) or best score.

        ``kind`` keeps humans, bots or both; ``after`` is the cursor of the previous page.
        """
        _check_limit(limit)
        if kind not in ("humans", "bots", "all"):
            raise ValueError(f"kind must be humans, bots or all, not {kind!r}")
        if game in RATED_GAMES:
            return await self._rating_board(game, kind, after, limit)
        return await self._score_board(game, kind, after, limit)

    async def _rating_board(
        self, game: str, kind: Kind, after: str | None, limit: int
    ) -> tuple[list[LeaderboardEntry], str | None]:
        args: list[Any] = [game]
        conditions = ["r.game = $1"]
        if kind != "all":
            args.append(kind == "bots")
            conditions.append(f"r.bot = ${len(args)}")
        if after is not None:
            ordinal, player = _parse_cursor(after, float)
            args += [ordinal, player]
            a, b = len(args) - 1, len(args)
            # "<=" first: a range the index can start from; the rest breaks the tie
            conditions.append(f"r.ordinal <= ${a} AND (r.ordinal < ${a} OR r.player > ${b})")
        args.append(limit + 1)
        rows = await self.db.fetch(
            "SELECT r.player, p.name, r.bot, r.mu, r.sigma, r.ordinal, r.games "
            "FROM ratings r JOIN players p ON p.id = r.player "
            f"WHERE {' AND '.join(conditions)} "
            f"ORDER BY r.ordinal DESC, r.player LIMIT ${len(args)}",
            *args,
        )
        entries = [
            LeaderboardEntry(
                player=row["player"],
                name=row["name"],
                bot=bool(row["bot"]),
                rating=_rating(row),
                best_score=None,
            )
            for row in rows[:limit]
        ]
        last = rows[limit - 1] if len(rows) > limit else None
        return entries, _cursor(last["ordinal"], last["player"]) if last is not None else None

    async def _score_board(
        self, game: str, kind: Kind, after: str | None, limit: int
    ) -> tuple[list[LeaderboardEntry], str | None]:
        args: list[Any] = [game]
        conditions = ["s.game = $1", "s.best_score IS NOT NULL"]
        if kind != "all":
            args.append(kind == "bots")
            conditions.append(f"s.bot = ${len(args)}")
        if after is not None:
            score, at, player = _parse_scoreboard_cursor(after)
            args += [score, at, player]
            s, t, p = len(args) - 2, len(args) - 1, len(args)
            conditions.append(
                f"s.best_score <= ${s} AND (s.best_score < ${s} OR s.best_at > ${t} "
                f"OR (s.best_at = ${t} AND s.player > ${p}))"
            )
        args.append(limit + 1)
        rows = await self.db.fetch(
            "SELECT s.player, p.name, s.bot, s.best_score, s.best_at "
            "FROM player_stats s JOIN players p ON p.id = s.player "
            f"WHERE {' AND '.join(conditions)} "
            f"ORDER BY s.best_score DESC, s.best_at, s.player LIMIT ${len(args)}",
            *args,
        )
        entries = [
            LeaderboardEntry(
                player=row["player"],
                name=row["name"],
                bot=bool(row["bot"]),
                rating=None,
                best_score=row["best_score"],
            )
            for row in rows[:limit]
        ]
        last = rows[limit - 1] if len(rows) > limit else None
        cursor = (
            _scoreboard_cursor(last["best_score"], last["best_at"], last["player"])
            if last is not None
            else None
        )
        return entries, cursor

    # ------------------------------------------------------------------ accounts
    async def create_account(
        self, player: str, name: str, name_key: str, password_hash: str
    ) -> Account:
        """Claim ``player`` under ``name``: the new account, its first token generation 1.

        Raises :class:`AlreadyClaimed` or :class:`NameTaken`, changing nothing.
        """
        await self.db.run(_create_account(player, name, name_key, password_hash, _now_ms()))
        return Account(player=player, name=name, password_hash=password_hash, token_generation=1)

    async def account_by_name(self, name_key: str) -> Account | None:
        """The account claimed under a (case-folded) name, or ``None``."""
        row = await self.db.fetchrow(
            "SELECT player, name, password_hash, token_generation FROM accounts "
            "WHERE name_key = $1",
            name_key,
        )
        if row is None:
            return None
        return Account(
            player=row["player"],
            name=row["name"],
            password_hash=row["password_hash"],
            token_generation=row["token_generation"],
        )

    async def token_generation(self, player: str) -> int | None:
        """The account's current token generation, or ``None`` for a player without one."""
        return await self.db.fetchval(
            "SELECT token_generation FROM accounts WHERE player = $1", player
        )

    async def token_generations(self, players: Sequence[str]) -> dict[str, int]:
        """The current token generation of each of ``players`` who has an account (read
        :data:`GENERATIONS_AT_ONCE` at a time: a node reads those of all its connections)."""
        found: dict[str, int] = {}
        for start in range(0, len(players), GENERATIONS_AT_ONCE):
            some = players[start : start + GENERATIONS_AT_ONCE]
            marks = ", ".join(f"${n}" for n in range(1, len(some) + 1))
            rows = await self.db.fetch(
                f"SELECT player, token_generation FROM accounts WHERE player IN ({marks})", *some
            )
            found.update((row["player"], row["token_generation"]) for row in rows)
        return found

    async def revoke_tokens(self, player: str) -> int | None:
        """Raise the account's token generation (every older token is refused); return it."""
        return await self.db.run(_one_value(
            "UPDATE accounts SET token_generation = token_generation + 1, updated_at = $2 "
            "WHERE player = $1 RETURNING token_generation",
            (player, _now_ms()),
        ))  # fmt: skip

    async def set_password_hash(self, player: str, password_hash: str) -> None:
        """Replace the account's password hash (a rehash with newer parameters)."""
        await self.db.run(_one_value(
            "UPDATE accounts SET password_hash = $2, updated_at = $3 WHERE player = $1",
            (player, password_hash, _now_ms()),
        ))  # fmt: skip


# Write scripts (see db.py): each runs in one transaction.


def _one_value(sql: str, args: tuple[Any, ...]) -> Script[Any]:
    """One statement; the first column of its first row, or ``None``."""
    rows = yield sql, args
    return rows[0][0] if rows else None


def _put_game(game: FinishedGame, lock_rows: bool) -> Script[bool]:
    """Write a game (see the module docstring); ``lock_rows``: ``FOR UPDATE`` the ratings."""
    ended = _ms(game.ended_at)
    inserted = yield (
        "INSERT INTO games (id, game, table_id, rated, started_at, ended_at, commitment, "
        "record, summary, sealed_until, private, arena) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) "
        "ON CONFLICT (id) DO NOTHING RETURNING id",
        (
            game.id, game.game, game.table, game.rated, _ms(game.started_at), ended,
            game.record.commitment, encode_record(game.record).decode(),
            _SUMMARY_ENCODER.encode(_Summary(game.players, game.result)).decode(),
            None if game.sealed_until is None else _ms(game.sealed_until), game.private,
            game.arena,
        ),
    )  # fmt: skip
    if not inserted:
        found = yield "SELECT commitment FROM games WHERE id = $1", (game.id,)
        stored = found[0]["commitment"]
        if stored != game.record.commitment:
            raise GameIdConflict(
                f"game id {game.id!r} is already stored for another game "
                f"(commitment {stored}, not {game.record.commitment})"
            )
        return False
    players = sorted(game.players, key=lambda p: p.player)  # one lock order for every write
    bots = yield from _see_players([(p.player, p.name, p.bot) for p in players], ended)
    rows, arguments = values(
        [(game.id, p.player, game.game, ended, p.seat, game.private) for p in players]
    )
    yield (
        f"INSERT INTO game_players (game_id, player, game, ended_at, seat, private) VALUES {rows}",
        arguments,
    )
    scored = game.game not in RATED_GAMES and game.scored
    rows, arguments = values(
        [
            (p.player, game.game, bots[p.player], 1, int(p.won), p.score if scored else None,
             ended, ended)
            for p in players
        ]
    )  # fmt: skip
    yield (
        "INSERT INTO player_stats "
        "(player, game, bot, games, wins, best_score, best_at, last_at) "
        f"VALUES {rows} "
        "ON CONFLICT (player, game) DO UPDATE SET "
        "bot = excluded.bot, "
        "games = player_stats.games + 1, "
        "wins = player_stats.wins + excluded.wins, "
        "best_at = CASE WHEN excluded.best_score > player_stats.best_score "
        "  OR player_stats.best_score IS NULL "
        "  THEN excluded.best_at ELSE player_stats.best_at END, "
        "best_score = CASE WHEN excluded.best_score > player_stats.best_score "
        "  OR player_stats.best_score IS NULL "
        "  THEN excluded.best_score ELSE player_stats.best_score END, "
        "last_at = CASE WHEN excluded.last_at > player_stats.last_at "
        "  THEN excluded.last_at ELSE player_stats.last_at END",
        arguments,
    )
    if game.rated and game.game in RATED_GAMES:
        yield from _rate(game, bots, ended, lock_rows)
    return True


def _put_or_conflict(game: FinishedGame, lock_rows: bool) -> Script[bool | GameIdConflict]:
    """:func:`_put_game`, a conflicting id given back instead of raised (it wrote nothing)."""
    try:
        return (yield from _put_game(game, lock_rows))
    except GameIdConflict as conflict:
        return conflict


def _see_players(players: list[tuple[str, str, bool]], at: int) -> Script[dict[str, bool]]:
    """Create or update players ``(id, name, bot)`` seen at ``at`` (the newest name wins; a bot
    stays a bot); return each one's ``bot``."""
    rows, arguments = values([(player, name, bot, at, at) for player, name, bot in players])
    found = yield (
        f"INSERT INTO players (id, name, bot, created_at, seen_at) VALUES {rows} "
        "ON CONFLICT (id) DO UPDATE SET "
        "name = CASE WHEN excluded.seen_at >= players.seen_at "
        "  THEN excluded.name ELSE players.name END, "
        "bot = players.bot OR excluded.bot, "
        "created_at = CASE WHEN excluded.created_at < players.created_at "
        "  THEN excluded.created_at ELSE players.created_at END, "
        "seen_at = CASE WHEN excluded.seen_at > players.seen_at "
        "  THEN excluded.seen_at ELSE players.seen_at END "
        "RETURNING id, bot",
        arguments,
    )
    return {row["id"]: bool(row["bot"]) for row in found}


def _rate(game: FinishedGame, bots: dict[str, bool], at: int, lock_rows: bool) -> Script[None]:
    places = {p.player: p.place for p in game.players if p.place is not None}
    if len(places) < 2:
        return
    players = sorted(places)
    # Rows exist before they are locked, so that two games with a new player in common queue on
    # that row (PostgreSQL) instead of both starting from the initial rating.
    rows, arguments = values(
        [
            (player, game.game, bots[player], INITIAL.mu, INITIAL.sigma, INITIAL.ordinal, 0, at)
            for player in players
        ]
    )
    yield (
        "INSERT INTO ratings (player, game, bot, mu, sigma, ordinal, games, updated_at) "
        f"VALUES {rows} ON CONFLICT (player, game) DO NOTHING",
        arguments,
    )
    found = yield (
        "SELECT player, mu, sigma FROM ratings WHERE game = $1 "
        f"AND player IN ({', '.join(f'${n}' for n in range(2, len(players) + 2))}) "
        f"ORDER BY player{' FOR UPDATE' if lock_rows else ''}",
        (game.game, *players),
    )
    current = {row["player"]: Skill(row["mu"], row["sigma"]) for row in found}
    new = rate(places, current)
    rows, arguments = values(
        [
            (player, game.game, bots[player], new[player].mu, new[player].sigma,
             new[player].ordinal, 1, at)
            for player in players
        ]
    )  # fmt: skip
    yield (
        "INSERT INTO ratings (player, game, bot, mu, sigma, ordinal, games, updated_at) "
        f"VALUES {rows} ON CONFLICT (player, game) DO UPDATE SET "
        "bot = excluded.bot, mu = excluded.mu, sigma = excluded.sigma, "
        "ordinal = excluded.ordinal, games = ratings.games + 1, "
        "updated_at = excluded.updated_at",
        arguments,
    )
    rows, arguments = values(
        [
            (player, game.game, game.id, at, places[player], current[player].mu,
             current[player].sigma, new[player].mu, new[player].sigma, new[player].ordinal)
            for player in players
        ]
    )  # fmt: skip
    yield (
        "INSERT INTO rating_history (player, game, game_id, at, place, mu_before, "
        f"sigma_before, mu, sigma, ordinal) VALUES {rows}",
        arguments,
    )


def _create_account(
    player: str, name: str, name_key: str, password_hash: str, now: int
) -> Script[None]:
    if (yield "SELECT 1 FROM accounts WHERE player = $1", (player,)):
        raise AlreadyClaimed(f"player {player} already has an account")
    if (yield "SELECT 1 FROM accounts WHERE name_key = $1", (name_key,)):
        raise NameTaken(f"the name {name!r} is already claimed")
    yield from _see_players([(player, name, False)], now)
    created = yield (
        "INSERT INTO accounts (player, name, name_key, password_hash, token_generation, "
        "created_at, updated_at) VALUES ($1, $2, $3, $4, 1, $5, $5) "
        "ON CONFLICT DO NOTHING RETURNING player",
        (player, name, name_key, password_hash, now),
    )
    if not created:  # a concurrent claim won between the checks and the insert
        raise NameTaken(f"the name {name!r} is already claimed")
