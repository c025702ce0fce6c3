"""The social contract (``Social``): follows and blocks (a block ends the follow), statuses that
live for their TTL and go when the player's connection closes, challenges taken at most once."""

from __future__ import annotations

import asyncio

from blackdrez.server.stores import Stores


async def test_follows_and_blocks_are_each_players_own(stores: Stores) -> None:
    social = stores.social
    assert await social.following("ann") == {}
    await social.follow("ann", "bob", "Bob")
    await social.follow("ann", "cat", "Cat")
    await social.follow("bob", "ann", "Ann")
    assert await social.following("ann") == {"bob": "Bob", "cat": "Cat"}
    await social.unfollow("ann", "cat")
    await social.block("ann", "bob", "Bob")
    assert await social.following("ann") == {}, "a block ends the follow"
    assert await social.blocked("ann") == {"bob": "Bob"}
    assert await social.following("bob") == {"ann": "Ann"}, "one-way"
    await social.unblock("ann", "bob")
    assert await social.blocked("ann") == {}


async def test_a_status_lives_its_ttl_and_goes_with_the_connection(stores: Stores) -> None:
    social = stores.social
    await social.seen({"ann": b"playing", "bob": b"online"}, ttl=0.3)
    assert await social.statuses(["ann", "bob", "cat"]) == {"ann": b"playing", "bob": b"online"}
    await social.gone("bob")
    assert await social.statuses(["bob"]) == {}
    await asyncio.sleep(0.5)
    assert await social.statuses(["ann"]) == {}, "not renewed: offline"
    assert await social.statuses([]) == {}


async def test_a_challenge_is_taken_at_most_once(stores: Stores) -> None:
    social = stores.social
    await social.put_challenge("c1", b"ann -> bob", ttl=5.0)
    taken = await asyncio.gather(*(social.take_challenge("c1") for _ in range(3)))
    assert sorted(taken, key=lambda t: t is None) == [b"ann -> bob", None, None]
    await social.put_challenge("c2", b"late", ttl=0.2)
    await asyncio.sleep(0.4)
    assert await social.take_challenge("c2") is None, "expired"
    assert await social.take_challenge("never") is None
