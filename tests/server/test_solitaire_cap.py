"""At most ``max_solitaire_sessions`` open solitaire sessions per player."""

from __future__ import annotations

import pytest

from blackdrez.clients.client import ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode


async def start(client, game: str = "blue_jacket") -> str:
    return (await client.request(v1.StartSolitaire(game=game))).table.id


async def test_one_session_past_the_cap_is_refused_and_changes_nothing(make_server, connect):
    server = await make_server(max_solitaire_sessions=2)
    ann = await connect(server, name="Ann")
    first = await start(ann)
    second = await start(ann, "blackjack_piles")
    await ann.request(v1.CreateTable())  # a BlackDrez table is not a session: it does not count
    with pytest.raises(ServerError) as refused:
        await start(ann)
    assert refused.value.code == ErrorCode.TOO_MANY_SESSIONS
    assert "leave one" in refused.value.error.message
    assert sorted(t for t in ann.tables if t.startswith("s")) == sorted([first, second])
    await ann.request(v1.LeaveTable(table=first))
    third = await start(ann)  # at once: the seat just given up no longer counts
    assert third not in (first, second)
    bob = await connect(server, name="Bob")  # the cap is per player
    await start(bob)


async def test_the_cap_holds_across_connections_and_nodes(make_server, connect, redis_url_clean):
    one = await make_server(redis_url=redis_url_clean, max_solitaire_sessions=1)
    two = await make_server(redis_url=redis_url_clean, max_solitaire_sessions=1)
    ann = await connect(one, name="Ann")
    await start(ann)
    await ann.close()
    again = await connect(two, token=ann.token)
    with pytest.raises(ServerError) as refused:
        await start(again)
    assert refused.value.code == ErrorCode.TOO_MANY_SESSIONS


async def test_zero_means_no_cap(make_server, connect) -> None:
    server = await make_server(max_solitaire_sessions=0)
    ann = await connect(server, name="Ann")
    for _ in range(3):
        await start(ann)
