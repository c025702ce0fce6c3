"""The arenas' contract (``Arenas``): an arena's info, the public ones listed by their end, each
player's standing written only over the one its writer read (compare-and-set), each game scored
once, every change announced on the arena's channel."""

from __future__ import annotations

import asyncio
import time

from blackdrez.server.stores import Stores
from blackdrez.server.stores.base import arena_channel

from .helpers import Inbox, eventually

DAY = 86_400.0


async def test_an_arena_is_kept_and_the_public_ones_listed_by_their_end(stores: Stores) -> None:
    arenas = stores.arenas
    now = time.time()
    assert await arenas.info("a1") is None
    await arenas.create("a2", b"later", now + 600, listed=True, keep=DAY)
    await arenas.create("a1", b"sooner", now + 300, listed=True, keep=DAY)
    await arenas.create("secret", b"private", now + 300, listed=False, keep=DAY)
    await arenas.create("old", b"ended", now - 100, listed=True, keep=DAY)
    assert await arenas.info("a1") == b"sooner" and await arenas.info("secret") == b"private"
    assert await arenas.listed(now) == [b"sooner", b"later"]
    assert await arenas.listed(now - 200) == [b"ended", b"sooner", b"later"]


async def test_standings_change_only_over_what_was_read_and_each_game_counts_once(
    stores: Stores,
) -> None:
    arenas = stores.arenas
    inbox = Inbox()
    await stores.bus.subscribe(arena_channel("a1"), inbox)
    await arenas.create("a1", b"info", time.time() + 600, listed=False, keep=DAY)
    assert await arenas.update("a1", {"ann": (None, b"ann 0")}, None) == 1
    assert await arenas.update("a1", {"ann": (None, b"ann again")}, None) == 0, "had one"
    changes = {"ann": (b"ann 0", b"ann 3"), "bob": (None, b"bob 0")}
    assert await arenas.update("a1", changes, "t1:1") == 1
    assert await arenas.standings("a1") == {"ann": b"ann 3", "bob": b"bob 0"}
    assert await arenas.update("a1", {"ann": (b"ann 3", b"ann 6")}, "t1:1") == -1, "scored"
    stale = {"ann": (b"ann 0", b"ann 5"), "bob": (b"bob 0", b"bob 1")}
    assert await arenas.update("a1", stale, "t2:1") == 0, "Ann's standing moved meanwhile"
    assert await arenas.standings("a1") == {"ann": b"ann 3", "bob": b"bob 0"}, "all or nothing"
    assert await arenas.update("a1", {"ann": (b"ann 3", b"ann 5")}, "t2:1") == 1
    await eventually(lambda: inbox.messages == [b"a1", b"a1", b"a1"])
    await asyncio.sleep(0.05)
    assert await arenas.standings("nowhere") == {}
