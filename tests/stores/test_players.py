"""The players contract (``Players``): where each player sits, the order of connections."""

from __future__ import annotations

from blackdrez.server.stores.base import (
    Stores,
)


async def test_player_tables(stores: Stores) -> None:
    assert await stores.players.tables("alice") == []
    await stores.players.add_table("alice", "t2")
    await stores.players.add_table("alice", "t1")
    await stores.players.add_table("alice", "t1")
    await stores.players.add_table("bob", "t3")
    assert await stores.players.tables("alice") == ["t1", "t2"]
    assert await stores.players.tables("bob") == ["t3"]

    await stores.players.remove_table("alice", "t1")
    await stores.players.remove_table("alice", "t-never")
    await stores.players.remove_table("carol", "t1")
    assert await stores.players.tables("alice") == ["t2"]
    await stores.players.remove_table("alice", "t2")
    assert await stores.players.tables("alice") == []


async def test_a_players_latest_connection_is_the_greatest_order_given_them(stores: Stores) -> None:
    """Every hello takes the next order; each player's latest is noted (for a node whose bus
    was down when that player connected elsewhere: ``Node._close_replaced_meanwhile``)."""
    first = await stores.players.next_attach("ann")
    second = await stores.players.next_attach("bob")
    third = await stores.players.next_attach("ann")
    assert first < second < third
    assert await stores.players.latest_attaches(["ann", "bob", "cy"]) == {
        "ann": third,
        "bob": second,
    }
    assert await stores.players.latest_attaches([]) == {}
