"""The daily deals contract (``DailyDeals``): one seed a day, one ranked session a player."""

from __future__ import annotations

import asyncio

from blackdrez.server.stores.base import (
    Stores,
)


async def test_a_daily_seed_is_drawn_once_and_a_daily_claimed_once(stores: Stores) -> None:
    """A player's first claim of a day's deal is ranked, and names the table of that ranked
    session: every later claim (any node's) answers that table, whose game it waits for."""
    first = await stores.daily.seed("blue_jacket", "2026-11-30", "one")
    assert first == "one"
    assert await stores.daily.seed("blue_jacket", "2026-11-30", "two") == "one"
    assert await stores.daily.seed("blue_jacket", "2026-12-01", "three") == "three"
    assert await stores.daily.seed("blackjack_piles", "2026-11-30", "four") == "four"
    assert await stores.daily.seed("blue_jacket", "2026-11-30", None) == "one"  # read only
    assert await stores.daily.seed("blue_jacket", "2026-11-29", None) is None
    assert await stores.daily.seed("blue_jacket", "2026-11-29", "five") == "five"  # none made
    assert await stores.daily.table("blue_jacket", "2026-11-30", "p1") is None
    keep = 60.0
    assert await stores.daily.claim("blue_jacket", "2026-11-30", "p1", "s1", keep) == "s1"
    assert await stores.daily.claim("blue_jacket", "2026-11-30", "p1", "s2", keep) == "s1"
    assert await stores.daily.table("blue_jacket", "2026-11-30", "p1") == "s1"
    assert await stores.daily.claim("blue_jacket", "2026-11-30", "p2", "s3", keep) == "s3"
    assert await stores.daily.claim("blue_jacket", "2026-12-01", "p1", "s4", keep) == "s4"
    assert await stores.daily.table("blackjack_piles", "2026-11-30", "p1") is None


async def test_a_daily_claim_lasts_as_long_as_it_is_kept_for(stores: Stores) -> None:
    """Who started a day's deal matters only while that day's sessions can start: a claim is
    kept for what the caller says (until a day after the deal's day ends), then forgotten, so
    the claims of past days do not pile up for ever (the seed alone is kept for good)."""
    assert await stores.daily.claim("blue_jacket", "2026-11-30", "p1", "s1", keep=0.3) == "s1"
    assert await stores.daily.claim("blue_jacket", "2026-11-30", "p2", "s2", keep=0.3) == "s2"
    assert await stores.daily.table("blue_jacket", "2026-11-30", "p1") == "s1"
    assert await stores.daily.claim("blue_jacket", "2026-12-01", "p1", "s3", keep=30) == "s3"
    await asyncio.sleep(0.5)
    assert await stores.daily.table("blue_jacket", "2026-11-30", "p1") is None
    assert await stores.daily.table("blue_jacket", "2026-11-30", "p2") is None
    assert await stores.daily.table("blue_jacket", "2026-12-01", "p1") == "s3"
