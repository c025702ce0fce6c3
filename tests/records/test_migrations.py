"""Schema migrations on SQLite and PostgreSQL: from empty, re-run, concurrent, refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from blackdrez.server.records.db import Database, DatabaseError, Script, open_database, sqlite_path
from blackdrez.server.records.migrations import (
    MIGRATIONS,
    Migration,
    SchemaError,
    latest_version,
    migrate,
    schema_version,
)
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.testing.redis_server import free_port

LATEST = MIGRATIONS[-1].version
EXTRA = Migration(LATEST + 1, "an extra table", ("CREATE TABLE extra (x INTEGER)",))


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """An open, empty database (not migrated)."""
    database = await open_database(database_url)
    yield database
    await database.close()


def _statement(sql: str, *args: object) -> Script[None]:
    yield sql, args


async def _tables(db: Database) -> set[str]:
    if db.dialect == "postgresql":
        rows = await db.fetch(
            "SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()"
        )
    else:
        rows = await db.fetch("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {row["name"] for row in rows}


async def test_an_empty_database_is_migrated_to_the_latest_schema(db: Database) -> None:
    assert await schema_version(db) == 0
    assert await migrate(db) == [m.version for m in MIGRATIONS]
    assert await schema_version(db) == latest_version()
    assert {"games", "game_players", "players", "player_stats", "ratings", "rating_history",
            "accounts", "schema_version"} <= await _tables(db)  # fmt: skip


async def test_migrating_again_changes_nothing(db: Database, database_url: str) -> None:
    await migrate(db)
    assert await migrate(db) == []
    store = await RecordsStore.open(database_url)  # what every server start does
    await store.close()
    assert await schema_version(db) == latest_version()


async def test_a_new_migration_applies_on_top_of_the_old_ones(db: Database) -> None:
    await migrate(db)
    assert await migrate(db, (*MIGRATIONS, EXTRA)) == [LATEST + 1]
    await db.run(_statement("INSERT INTO extra (x) VALUES ($1)", 7))
    assert await db.fetchval("SELECT x FROM extra") == 7


async def test_a_database_from_newer_code_is_refused(db: Database) -> None:
    await migrate(db, (*MIGRATIONS, EXTRA))
    newer = f"schema version {LATEST + 1}, newer than this code's {LATEST}"
    with pytest.raises(SchemaError, match=newer):
        await migrate(db)


async def test_an_edited_migration_is_refused(db: Database) -> None:
    await migrate(db)
    edited = Migration(1, MIGRATIONS[0].name, (*MIGRATIONS[0].statements, "SELECT 1"))
    with pytest.raises(SchemaError, match=r"migration 1 .* differs"):
        await migrate(db, (edited, *MIGRATIONS[1:]))


async def test_a_failing_migration_leaves_the_schema_as_it_was(db: Database) -> None:
    await migrate(db)
    broken = Migration(LATEST + 1, "broken", ("CREATE TABLE half (x INTEGER)", "THIS IS NOT SQL"))
    with pytest.raises(Exception):  # noqa: B017 - each driver raises its own syntax error
        await migrate(db, (*MIGRATIONS, broken))
    assert await schema_version(db) == LATEST
    assert "half" not in await _tables(db)


async def test_migrations_must_be_numbered_in_order(db: Database) -> None:
    with pytest.raises(SchemaError, match="numbered 1, 2, 3"):
        await migrate(db, (EXTRA,))
    assert await schema_version(db) == 0


async def test_two_servers_starting_at_once_migrate_once(database_url: str) -> None:
    first, second = await open_database(database_url), await open_database(database_url)
    try:
        applied = await asyncio.gather(migrate(first), migrate(second))
        assert sorted(applied) == [[], [m.version for m in MIGRATIONS]]
        assert await first.fetchval("SELECT COUNT(*) FROM schema_version") == LATEST
    finally:
        await first.close()
        await second.close()


def test_database_urls() -> None:
    assert str(sqlite_path("sqlite:///records.db")) == "records.db"
    assert str(sqlite_path("sqlite:////var/db/records.db")) == "/var/db/records.db"
    assert str(sqlite_path("data/records.db")) == "data/records.db"
    assert sqlite_path("postgresql://u@h/db") is None
    with pytest.raises(DatabaseError, match="sqlite:///FILE"):
        sqlite_path("sqlite://records.db")


async def test_an_unknown_or_unreachable_database_is_a_clear_error() -> None:
    with pytest.raises(DatabaseError, match="unknown database URL scheme 'mysql'"):
        await open_database("mysql://u@h/db")
    with pytest.raises(DatabaseError, match="cannot connect to postgresql://u:\\*\\*\\*@"):
        await open_database(f"postgresql://u:secret@127.0.0.1:{free_port()}/db")


def _insert(sql: str, rows: list[tuple[object, ...]]) -> Script[None]:
    for row in rows:
        yield sql, row


OldGame = tuple[str, str, str, int, int, int | None, str, str, int]
"""id, game, table, started, ended, sealed_until (ms), seed, player, score."""


async def _old_games(db: Database, games: list[OldGame]) -> None:
    """Write ``games`` (one player each) as the code of schema 2 wrote them."""
    players = sorted({game[7] for game in games})
    await db.run(_insert(
        "INSERT INTO players (id, name, bot, created_at, seen_at) VALUES ($1, $1, FALSE, 0, 0)",
        [(player,) for player in players],
    ))  # fmt: skip
    await db.run(_insert(
        "INSERT INTO games (id, game, table_id, rated, started_at, ended_at, commitment, "
        "record, summary, sealed_until) VALUES ($1, $2, $3, FALSE, $4, $5, 'c', $6, $7, $8)",
        [
            (gid, game, table, started, ended,
             f'{{"game": "{game}", "config": {{}}, "seed": "{seed}", "actions": []}}',
             f'{{"players": [{{"seat": 0, "player": "{player}", "name": "{player}", '
             f'"bot": false, "place": null, "score": {score}, "won": false}}], "result": {{}}}}',
             sealed)
            for gid, game, table, started, ended, sealed, seed, player, score in games
        ],
    ))  # fmt: skip
    await db.run(_insert(
        "INSERT INTO game_players (game_id, player, game, ended_at, seat) "
        "VALUES ($1, $2, $3, $4, 0)",
        [(gid, player, game, ended) for gid, game, _, _, ended, _, _, player, _ in games],
    ))  # fmt: skip


async def test_games_stored_before_private_games_existed_are_public(db: Database) -> None:
    await migrate(db, MIGRATIONS[:2])
    await _old_games(db, [
        ("d:1", "blackdrez", "t_d", 0, 1_000, None, "s-d", "ann", 6),
        ("r:1", "blue_jacket", "s_r", 0, 3_000, None, "f00d", "ann", 90),
    ])  # fmt: skip
    await migrate(db)
    store = RecordsStore(db)
    for lister in (store.games(), store.games(player="ann"), store.games(game="blackdrez")):
        page, _ = await lister
        assert page and not any(game.private for game in page)
    assert len((await store.games(player="ann"))[0]) == 2
    assert await store.game("d:1") is not None


async def test_games_stored_before_arenas_existed_are_in_none(db: Database) -> None:
    await migrate(db, MIGRATIONS[:4])
    await _old_games(db, [("d:1", "blackdrez", "t_d", 0, 1_000, None, "s-d", "ann", 6)])
    assert await migrate(db) == [5]
    store = RecordsStore(db)
    page, _ = await store.games()
    assert [(g.id, g.arena) for g in page] == [("d:1", None)]
    assert (await store.games(arena="A"))[0] == []
    record = await store.game("d:1")
    assert record is not None and record.arena is None


async def test_best_scores_stored_under_the_old_rule_are_recomputed_under_todays(
    db: Database,
) -> None:
    """Before, a best score was the best of every game; now only ranked games played without
    help count: a numbered deal never, a daily deal in the player's first session of it only."""
    await migrate(db, MIGRATIONS[:3])
    day = 1_764_547_200_000  # a daily deal's day end (ms)
    await _old_games(db, [
        ("d:1", "blackdrez", "t_d", 0, 1_000, None, "s-d", "ann", 6),
        ("n:1", "blue_jacket", "s_n", 0, 2_000, None, "blue_jacket:deal:7", "ann", 200),
        ("r:1", "blue_jacket", "s_r", 0, 3_000, None, "f00d", "ann", 90),
        ("r:2", "blue_jacket", "s_r", 0, 4_000, None, "beef", "ann", 120),
        ("a:1", "blue_jacket", "s_a", 50, 5_000, day, "daily", "ann", 150),
        ("b:1", "blue_jacket", "s_b", 100, 6_000, day, "daily", "ann", 180),
        ("z:1", "blackjack_piles", "s_z", 0, 7_000, None, "blackjack_piles:deal:3", "bob", 40),
        ("y:1", "blue_jacket", "s_y", 0, 8_000, None, "c0de", "cy", 70),
        ("y:2", "blue_jacket", "s_y2", 0, 9_000, None, "c0fe", "cy", 99),
    ])  # fmt: skip
    # the old rule: the best of every game. cy's 99 came after the new rule, which left it out
    # (hints, not stored): the stored best is 70
    await db.run(_insert(
        "INSERT INTO player_stats (player, game, bot, games, wins, best_score, best_at, last_at) "
        "VALUES ($1, $2, FALSE, 1, 0, $3, $4, 0)",
        [("ann", "blackdrez", None, None), ("ann", "blue_jacket", 200, 2_000),
         ("bob", "blackjack_piles", 40, 7_000), ("cy", "blue_jacket", 70, 8_000)],
    ))  # fmt: skip

    assert await migrate(db, MIGRATIONS[:4]) == [4]
    best = {
        (row["player"], row["game"]): (row["best_score"], row["best_at"])
        for row in await db.fetch("SELECT player, game, best_score, best_at FROM player_stats")
    }
    assert best == {
        ("ann", "blackdrez"): (None, None),
        # not the numbered deal's 200 nor the second daily session's 180: the first one's 150
        ("ann", "blue_jacket"): (150, 5_000),
        ("bob", "blackjack_piles"): (None, None),  # only a numbered deal: off the board
        ("cy", "blue_jacket"): (70, 8_000),  # never raised
    }
    board, _ = await RecordsStore(db).leaderboard("blue_jacket")
    assert [(e.player, e.best_score) for e in board] == [("ann", 150), ("cy", 70)]
