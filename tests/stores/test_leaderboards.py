"""The leaderboards contract (``Leaderboards``): best scores, ties, kept records."""

from __future__ import annotations

import asyncio

import pytest

from blackdrez.server.stores.base import (
    Stores,
)


async def test_leaderboard_keeps_each_players_best(stores: Stores) -> None:
    assert await stores.leaderboards.top("piles", 10) == []
    assert await stores.leaderboards.submit("piles", "p1", b"Ann", 50)
    assert await stores.leaderboards.submit("piles", "p2", b"Bob", 70)
    assert not await stores.leaderboards.submit("piles", "p1", b"Ann 2", 40)  # worse: ignored
    assert await stores.leaderboards.submit(
        "piles", "p1", b"Ann", 50
    )  # the same again: it is there
    assert await stores.leaderboards.submit("piles", "p3", b"Cy", 60)
    assert await stores.leaderboards.top("piles", 10) == [
        ("p2", b"Bob", 70),
        ("p3", b"Cy", 60),
        ("p1", b"Ann", 50),
    ]
    assert await stores.leaderboards.submit("piles", "p1", b"Annie", 90)  # better: replaces it
    assert await stores.leaderboards.top("piles", 10) == [
        ("p1", b"Annie", 90),
        ("p2", b"Bob", 70),
        ("p3", b"Cy", 60),
    ]


async def test_leaderboard_ties_rank_who_scored_first(stores: Stores) -> None:
    await stores.leaderboards.submit("piles", "late", b"Late", 10)
    await stores.leaderboards.submit("piles", "early", b"Early", 30)
    await stores.leaderboards.submit("piles", "second", b"Second", 30)
    await stores.leaderboards.submit(
        "piles", "early", b"Renamed", 30
    )  # equal, not better: no change
    await stores.leaderboards.submit("piles", "late", b"Late", 30)  # reaches the tie last
    assert await stores.leaderboards.top("piles", 10) == [
        ("early", b"Early", 30),
        ("second", b"Second", 30),
        ("late", b"Late", 30),
    ]


async def test_leaderboard_limit_and_games_apart(stores: Stores) -> None:
    for rank in range(5):
        await stores.leaderboards.submit("piles", f"p{rank}", f"P{rank}".encode(), 100 - rank)
    await stores.leaderboards.submit("blue-jacket", "p9", b"Nine", 1)
    await stores.leaderboards.submit("piles", "neg", b"Negative", -5)
    assert [player for player, _, _ in await stores.leaderboards.top("piles", 3)] == [
        "p0",
        "p1",
        "p2",
    ]
    assert len(await stores.leaderboards.top("piles", 100)) == 6
    assert (await stores.leaderboards.top("piles", 100))[-1] == ("neg", b"Negative", -5)
    assert await stores.leaderboards.top("piles", 0) == []
    assert await stores.leaderboards.top("blue-jacket", 10) == [("p9", b"Nine", 1)]
    assert await stores.leaderboards.top("no-such-game", 10) == []


async def test_leaderboard_names_and_players_with_odd_characters(stores: Stores) -> None:
    await stores.leaderboards.submit("g:{x}", "id:with:colons", "Zoë {ü}".encode(), 2**40)
    assert await stores.leaderboards.top("g:{x}", 1) == [
        ("id:with:colons", "Zoë {ü}".encode(), 2**40)
    ]


async def test_records_kept_for_good(stores: Stores) -> None:
    assert await stores.leaderboards.kept_record("s1.1") is None
    await stores.leaderboards.keep_record("s1.1", b"{}")
    assert await stores.leaderboards.kept_record("s1.1") == b"{}"


@pytest.mark.parametrize("stores", ["redis", "cluster"], indirect=True)
async def test_a_record_kept_for_a_while_then_for_good(stores: Stores) -> None:
    await stores.leaderboards.keep_record("s2.1", b"{}", ttl=0.2)
    await stores.leaderboards.keep_record("s3.1", b"{}", ttl=60.0)
    await stores.leaderboards.keep_record("s3.1", b"{}")  # on a board now: for good
    await asyncio.sleep(0.4)
    assert await stores.leaderboards.kept_record("s2.1") is None
    assert await stores.leaderboards.kept_record("s3.1") == b"{}"
