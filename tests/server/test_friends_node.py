"""Friends through real servers on one Redis (issue 37): a follow shows a player connected to
the other node; a challenge reaches them there over Redis, and accepted, both sit at one table
and play it; the Python client keeps the challenges pushed to it."""

from __future__ import annotations

import asyncio

import pytest

from blackdrez.clients.bots import play_table
from blackdrez.protocol import v1
from blackdrez.server.node import matchmaking as node_matchmaking


async def test_a_challenge_crosses_nodes_and_both_play_the_table(
    make_server, connect, redis_url_clean, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A challenge's table is the queue's kind: 0.2 s between rounds here (3 s as deployed).
    monkeypatch.setattr(node_matchmaking, "QUEUE_ROUND_PAUSE", 0.2)
    one = await make_server(redis_url=redis_url_clean, node_id="n1")
    two = await make_server(redis_url=redis_url_clean, node_id="n2")
    ann, bob = await connect(one, name="Ann"), await connect(two, name="Bob")

    async def bob_is_seen() -> bool:
        return bool(await one.node.store.social.statuses([bob.player]))

    for _ in range(50):  # his hello's note of where he is
        if await bob_is_seen():
            break
        await asyncio.sleep(0.05)
    await ann.follow(bob.player)
    friends = await ann.friends()
    assert [(f.name, f.status) for f in friends.following] == [("Bob", "online")]
    sent = await ann.challenge(bob.player)
    await bob.wait_until(lambda: bob.challenges, 5)
    told = bob.challenges[0]
    assert isinstance(told, v1.Challenged) and told.challenge == sent.challenge
    await bob.answer_challenge(told.challenge, accept=True)
    found = await asyncio.gather(ann.wait_for_match(10), bob.wait_for_match(10))
    table = found[0].table
    assert found[1].table == table and found[0].players == ["Ann", "Bob"]
    for client in (ann, bob):
        await client.request(v1.JoinTable(table=table))
    results = await asyncio.gather(*(play_table(c, table) for c in (ann, bob)))
    assert all(r.fair for r in results)
