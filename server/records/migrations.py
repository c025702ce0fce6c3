"""The records database's schema, as an ordered list of versioned migrations.

Theory of operation
-------------------
:data:`MIGRATIONS` is the schema's whole history: migration ``n`` turns schema ``n - 1`` into
``n``. A released migration is never edited (its checksum is stored when it is applied, and
:func:`migrate` refuses a database whose applied migrations differ from the code's); a change is
a new migration at the end. The same SQL runs on SQLite and PostgreSQL (see ``db.py``).

:func:`migrate` runs in one transaction: it takes the database's write lock (PostgreSQL: an
advisory lock, so two nodes starting at once migrate one after the other; SQLite: the write
lock of ``BEGIN IMMEDIATE``), creates the
``schema_version`` table if needed, checks what was applied, and applies the rest in order. It is
safe to run at every start; a database written by a newer version of the code (a version the code
does not know) is refused rather than used.

Times are integer milliseconds since the epoch (exact keys for keyset pagination); booleans are
``BOOLEAN`` (0/1 in SQLite). Why each table and index exists:

* ``games``: one row per finished game; ``record`` is the record file ``blackdrez verify``
  accepts, ``summary`` the players and result as JSON (so a page of games is one query).
  Indexes: recent games overall and per game, newest first (``ended_at``, then ``id``).
* ``game_players``: one row per seated player and game, for "games of a player" (newest first,
  optionally per game) without scanning ``games``.
* ``players``: every player id seen, with its last name; ``bot`` once set stays set.
* ``player_stats``: per player and game, the games, wins and best score, kept up to date on each
  write so that a profile and a solitaire leaderboard are bounded index reads.
* ``ratings`` / ``rating_history``: the current Weng-Lin rating per player and game, and one row
  per rated game and player (the rating before and after).
* ``accounts``: a claimed player id: unique name (case-folded), argon2 hash, token generation.
* ``games.sealed_until`` (2): a daily deal's game, stored at once but not served before its UTC
  day has ended (the record reveals the day's seed, which stays secret until then).
* ``games.private``, ``game_players.private`` (3): a game played at a private table, listed and
  served to its players only. Games stored before are public (nothing stored said otherwise).
  Indexes: the public games, overall, per game and per player, newest first, so that leaving
  the private ones out of a list is still one range of one index.
* Best scores recomputed (4): ``player_stats.best_score`` from the stored games under the rule
  that only a ranked game played without help counts (see :func:`_recompute_best_scores`).
* ``games.arena`` (5): the arena a game was played in (its table was paired by the arena), so
  that an arena's games, and from them its standings, can be read and checked. Index: an
  arena's games, newest first (partial: most games are in none).

A migration is SQL statements, then optionally a *script* (``db.py``'s write scripts) for what
SQL cannot say on both databases alike (reading the JSON a row holds). A script is part of the
released migration: it names what it relies on itself instead of importing rules that may
change later.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from blackdrez.games import GAMES
from blackdrez.server.records.db import Database, Script


@dataclass(frozen=True)
class Migration:
    """One step of the schema: its version, a short name and its statements, in order."""

    version: int
    name: str
    statements: tuple[str, ...]
    script: Callable[[], Script[None]] | None = None
    """Run after the statements, in the same transaction."""

    @property
    def checksum(self) -> str:
        """A hash of the statements (and the script's name): an applied migration must never
        change."""
        text = "\n;\n".join(self.statements)
        if self.script is not None:
            text += f"\n;\nscript {self.script.__qualname__}"
        return hashlib.sha256(text.encode()).hexdigest()


class _Stored(msgspec.Struct):
    """What the best-score recomputation reads of a stored game's record."""

    seed: str | None = None


class _Seat(msgspec.Struct):
    """A seat of a stored game's summary: who, and their score."""

    player: str
    score: int | None = None


class _Players(msgspec.Struct):
    """What the best-score recomputation reads of a stored game's summary."""

    players: list[_Seat]


_RATED = tuple(sorted(name for name, spec in GAMES.items() if spec.rated))
"""The games migration 4 leaves alone, read from the specs (``GameSpec.rated``): the rated
games, whose scores know no hints or undos. That was BlackDrez alone when it was written, and
still is: the migration does today what it did then."""
_PAGE = 500
"""Games read at once by migration 4."""


def _recompute_best_scores() -> Script[None]:
    """Migration 4: each solitaire best score as today's rule makes it, from the stored games.

    Before that rule, a best score was the best of all of a player's games; now it is the best
    of their ranked games played without help (``FinishedGame.scored``). What the stored games
    say of it: a numbered deal's record has its public seed (``{game}:deal:{n}``); a daily
    deal's games (``sealed_until`` set) were ranked in the player's first session of that deal,
    the table of their earliest game of it. Hints and undos were never stored: so that an
    assisted game left out by the rule when it was stored does not come back, no best score
    rises here (the new best is the best candidate not above the stored one, and a player with
    no stored best keeps none).
    """
    marks = ", ".join(f"${n}" for n in range(1, len(_RATED) + 1))
    candidates: dict[tuple[str, str], list[tuple[int, int]]] = {}
    first_daily: dict[tuple[str, str, int], tuple[int, str, str]] = {}
    daily: list[tuple[str, str, int, str, int, int]] = []
    last = ""
    while True:
        rows = yield (
            "SELECT id, game, table_id, started_at, ended_at, sealed_until, record, summary "
            f"FROM games WHERE game NOT IN ({marks}) AND id > ${len(_RATED) + 1} "
            f"ORDER BY id LIMIT {_PAGE}",
            (*_RATED, last),
        )
        for row in rows:
            seed = msgspec.json.decode(row["record"], type=_Stored).seed or ""
            if re.fullmatch(rf"{re.escape(row['game'])}:deal:[0-9]+", seed):
                continue  # a numbered deal: its stock is public
            for seat in msgspec.json.decode(row["summary"], type=_Players).players:
                if seat.score is None:
                    continue
                if row["sealed_until"] is None:
                    candidates.setdefault((seat.player, row["game"]), []).append(
                        (seat.score, row["ended_at"])
                    )
                    continue
                deal = (seat.player, row["game"], row["sealed_until"])
                start = (row["started_at"], row["id"], row["table_id"] or "")
                first_daily[deal] = min(first_daily.get(deal, start), start)
                daily.append((*deal, row["table_id"] or "", seat.score, row["ended_at"]))
        if len(rows) < _PAGE:
            break
        last = rows[-1]["id"]
    for player, game, day, table, score, ended in daily:
        if first_daily[(player, game, day)][2] == table:
            candidates.setdefault((player, game), []).append((score, ended))
    stats = yield (
        "SELECT player, game, best_score, best_at FROM player_stats "
        f"WHERE best_score IS NOT NULL AND game NOT IN ({marks})",
        _RATED,
    )
    for row in stats:
        kept = [
            c for c in candidates.get((row["player"], row["game"]), []) if c[0] <= row["best_score"]
        ]
        best, at = max(kept, key=lambda c: (c[0], -c[1])) if kept else (None, None)
        if (best, at) != (row["best_score"], row["best_at"]):
            yield (
                "UPDATE player_stats SET best_score = $3, best_at = $4 "
                "WHERE player = $1 AND game = $2",
                (row["player"], row["game"], best, at),
            )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "games, players, ratings, accounts",
        (
            """CREATE TABLE players (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                bot BOOLEAN NOT NULL,
                created_at BIGINT NOT NULL,
                seen_at BIGINT NOT NULL
            )""",
            """CREATE TABLE games (
                id TEXT PRIMARY KEY,
                game TEXT NOT NULL,
                table_id TEXT,
                rated BOOLEAN NOT NULL,
                started_at BIGINT NOT NULL,
                ended_at BIGINT NOT NULL,
                commitment TEXT NOT NULL,
                record TEXT NOT NULL,
                summary TEXT NOT NULL
            )""",
            "CREATE INDEX games_recent ON games (ended_at DESC, id DESC)",
            "CREATE INDEX games_by_game ON games (game, ended_at DESC, id DESC)",
            """CREATE TABLE game_players (
                game_id TEXT NOT NULL REFERENCES games (id),
                player TEXT NOT NULL REFERENCES players (id),
                game TEXT NOT NULL,
                ended_at BIGINT NOT NULL,
                seat INTEGER NOT NULL,
                PRIMARY KEY (game_id, player)
            )""",
            """CREATE INDEX game_players_recent
                ON game_players (player, ended_at DESC, game_id DESC)""",
            """CREATE INDEX game_players_by_game
                ON game_players (player, game, ended_at DESC, game_id DESC)""",
            """CREATE TABLE player_stats (
                player TEXT NOT NULL REFERENCES players (id),
                game TEXT NOT NULL,
                bot BOOLEAN NOT NULL,
                games INTEGER NOT NULL,
                wins INTEGER NOT NULL,
                best_score BIGINT,
                best_at BIGINT,
                last_at BIGINT NOT NULL,
                PRIMARY KEY (player, game)
            )""",
            """CREATE INDEX player_stats_best
                ON player_stats (game, best_score DESC, best_at, player)""",
            """CREATE INDEX player_stats_best_kind
                ON player_stats (game, bot, best_score DESC, best_at, player)""",
            """CREATE TABLE ratings (
                player TEXT NOT NULL REFERENCES players (id),
                game TEXT NOT NULL,
                bot BOOLEAN NOT NULL,
                mu DOUBLE PRECISION NOT NULL,
                sigma DOUBLE PRECISION NOT NULL,
                ordinal DOUBLE PRECISION NOT NULL,
                games INTEGER NOT NULL,
                updated_at BIGINT NOT NULL,
                PRIMARY KEY (player, game)
            )""",
            "CREATE INDEX ratings_board ON ratings (game, ordinal DESC, player)",
            "CREATE INDEX ratings_board_kind ON ratings (game, bot, ordinal DESC, player)",
            """CREATE TABLE rating_history (
                player TEXT NOT NULL REFERENCES players (id),
                game TEXT NOT NULL,
                game_id TEXT NOT NULL REFERENCES games (id),
                at BIGINT NOT NULL,
                place INTEGER NOT NULL,
                mu_before DOUBLE PRECISION NOT NULL,
                sigma_before DOUBLE PRECISION NOT NULL,
                mu DOUBLE PRECISION NOT NULL,
                sigma DOUBLE PRECISION NOT NULL,
                ordinal DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (player, game, game_id)
            )""",
            """CREATE INDEX rating_history_recent
                ON rating_history (player, game, at DESC, game_id DESC)""",
            """CREATE TABLE accounts (
                player TEXT PRIMARY KEY REFERENCES players (id),
                name TEXT NOT NULL,
                name_key TEXT NOT NULL UNIQUE,
                password_hash TEXT NOT NULL,
                token_generation INTEGER NOT NULL,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )""",
        ),
    ),
    Migration(
        2,
        "daily deals' games sealed until their day ends",
        ("ALTER TABLE games ADD COLUMN sealed_until BIGINT",),
    ),
    Migration(
        3,
        "private tables' games read by their players only",
        (
            "ALTER TABLE games ADD COLUMN private BOOLEAN NOT NULL DEFAULT FALSE",
            "ALTER TABLE game_players ADD COLUMN private BOOLEAN NOT NULL DEFAULT FALSE",
            "CREATE INDEX games_public ON games (private, ended_at DESC, id DESC)",
            "CREATE INDEX games_public_by_game ON games (private, game, ended_at DESC, id DESC)",
            """CREATE INDEX game_players_public
                ON game_players (player, private, ended_at DESC, game_id DESC)""",
            """CREATE INDEX game_players_public_by_game
                ON game_players (player, private, game, ended_at DESC, game_id DESC)""",
        ),
    ),
    Migration(
        4,
        "best scores of ranked games played without help only",
        (),
        _recompute_best_scores,
    ),
    Migration(
        5,
        "the arena a game was played in",
        (
            "ALTER TABLE games ADD COLUMN arena TEXT",
            """CREATE INDEX games_by_arena ON games (arena, private, ended_at DESC, id DESC)
                WHERE arena IS NOT NULL""",
        ),
    ),
)
"""Every migration, oldest first; versions are 1, 2, 3... with no gap."""

_ADVISORY_LOCK = 0x6264_7265_636F_7264  # "bdrecord": one key for this schema's migrations


class SchemaError(Exception):
    """The database's schema is not one this code can use (newer, or edited migrations)."""


def latest_version() -> int:
    """The schema version the code expects."""
    return MIGRATIONS[-1].version


async def migrate(db: Database, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Bring ``db`` to the latest schema; return the versions applied now (empty: up to date).

    Raises :class:`SchemaError` for a database with a migration the code does not have, or one
    whose checksum differs from the code's; nothing is changed then.
    """
    _check_order(migrations)
    return await db.run(_migrate(db.dialect, migrations, int(time.time() * 1000)))


def _migrate(dialect: str, migrations: tuple[Migration, ...], now: int) -> Script[list[int]]:
    if dialect == "postgresql":
        yield "SELECT pg_advisory_xact_lock($1)", (_ADVISORY_LOCK,)
    yield (
        """CREATE TABLE IF NOT EXISTS schema_version (
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            checksum TEXT NOT NULL,
            applied_at BIGINT NOT NULL
        )""",
        (),
    )
    rows = yield "SELECT version, checksum FROM schema_version ORDER BY version", ()
    applied = {row["version"]: row["checksum"] for row in rows}
    _check_applied(applied, migrations)
    done: list[int] = []
    for migration in migrations:
        if migration.version in applied:
            continue
        for statement in migration.statements:
            yield statement, ()
        if migration.script is not None:
            yield from migration.script()
        yield (
            "INSERT INTO schema_version (version, name, checksum, applied_at) "
            "VALUES ($1, $2, $3, $4)",
            (migration.version, migration.name, migration.checksum, now),
        )
        done.append(migration.version)
    return done


async def schema_version(db: Database) -> int:
    """The database's current schema version (0 for an empty database)."""
    if db.dialect == "postgresql":
        exists = await db.fetchval("SELECT to_regclass('schema_version') IS NOT NULL")
    else:
        exists = await db.fetchval(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        )
    if not exists:
        return 0
    return await db.fetchval("SELECT MAX(version) FROM schema_version") or 0


def _check_order(migrations: tuple[Migration, ...]) -> None:
    versions = [migration.version for migration in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise SchemaError(f"migrations must be numbered 1, 2, 3... in order, not {versions}")


def _check_applied(applied: dict[int, str], migrations: tuple[Migration, ...]) -> None:
    known = {migration.version: migration for migration in migrations}
    unknown = sorted(set(applied) - set(known))
    if unknown:
        raise SchemaError(
            f"the database has schema version {unknown[-1]}, newer than this code's "
            f"{migrations[-1].version}: upgrade the server"
        )
    for version, checksum in applied.items():
        if known[version].checksum != checksum:
            raise SchemaError(
                f"migration {version} ({known[version].name}) differs from the one applied to "
                "the database: released migrations must not be edited"
            )
