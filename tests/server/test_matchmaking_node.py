"""Matchmaking through a real server (issue 37): players who ``find_game`` are seated together at
a table the server makes and starts, each told ``match_found``; one place per player however
often or from however many connections they ask, kept across a reconnect; a cancel takes them
out; bots fill the seats nobody took once a ticket allows it; and across two nodes on one Redis
the queue is one, whichever node leads it."""

from __future__ import annotations

import asyncio

import pytest

from blackdrez.clients.client import ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.matchmaking.pairing import BAND


async def seated(client, found: v1.MatchFound) -> v1.Joined:
    """``client`` watches the table the queue made for it."""
    joined = await client.request(v1.JoinTable(table=found.table))
    assert joined.seat == found.seat
    return joined


async def test_two_players_who_ask_for_two_seats_play_together(server, connect) -> None:
    ann = await connect(server, name="Ann")
    bob = await connect(server, name="Bob")
    queued = await ann.find_game(2)
    assert queued.seats == 2 and not queued.rated and queued.waiting == 1
    assert queued.band == BAND and queued.rating == 1500
    await bob.find_game(2)
    found = await asyncio.gather(ann.wait_for_match(10), bob.wait_for_match(10))
    assert found[0].table == found[1].table
    assert {f.seat for f in found} == {0, 1}
    assert found[0].players == ["Ann", "Bob"], "seated in the order they came"
    assert found[0].bots == 0
    for client, match in zip((ann, bob), found, strict=True):
        await seated(client, match)
    table = found[0].table
    for client in (ann, bob):
        await client.wait_until(lambda c=client: c.tables[table].view is not None)
    info = ann.tables[table].info
    assert info.status == "playing", "the game starts at once"
    assert [s.player for s in info.seats] == [ann.player, bob.player]
    (
        await ann.wait_until(lambda: all(s.connected for s in ann.tables[table].info.seats)),
        "each counts as here once they watch",
    )
    assert await server.node.store.matchmaking.waiting(0.0) == [], "both left the queue"


async def test_sizes_that_do_not_fit_are_not_matched(server, connect) -> None:
    ann = await connect(server, name="Ann")
    bob = await connect(server, name="Bob")
    await ann.find_game(2)
    await bob.find_game(3)
    with pytest.raises(TimeoutError):
        await ann.wait_for_match(1.5)
    assert ann.matched is None and bob.matched is None


async def test_asking_again_keeps_the_place_and_cancelling_leaves_the_queue(
    server, connect
) -> None:
    ann = await connect(server, name="Ann")
    first = await ann.find_game(3)
    await asyncio.sleep(0.2)
    again = await ann.find_game(2)
    assert again.since == first.since, "one place per player, kept"
    assert again.waiting == 1 and again.seats == 2
    await ann.cancel_find()
    await ann.cancel_find()  # not queued: ok all the same
    bob = await connect(server, name="Bob")
    await bob.find_game(2)
    with pytest.raises(TimeoutError):
        await bob.wait_for_match(1.5)
    assert ann.matched is None


async def test_a_place_is_kept_across_a_reconnect(server, connect) -> None:
    ann = await connect(server, name="Ann", reconnect=True)
    first = await ann.find_game(2)
    await ann.drop()
    await ann.wait_until(lambda: ann.reconnects == 1 and ann.queued is not None, 10)
    assert ann.queued.since == first.since
    bob = await connect(server, name="Bob")
    await bob.find_game(2)
    found = await ann.wait_for_match(10)
    assert found.players == ["Ann", "Bob"]


async def test_bots_take_the_seats_nobody_took_once_the_ticket_allows(server, connect) -> None:
    ann = await connect(server, name="Ann")
    await ann.find_game(3, bots_after=1.0)
    found = await ann.wait_for_match(10)
    assert found.bots == 2 and found.players == ["Ann"]
    await seated(ann, found)
    await ann.wait_until(lambda: ann.tables[found.table].info.status == "playing")
    seats = ann.tables[found.table].info.seats
    assert [bool(s and s.bot) for s in seats] == [False, True, True], "labelled as bots"


async def test_bad_choices_are_refused_and_queue_nobody(server, connect) -> None:
    ann = await connect(server, name="Ann")
    for bad in ({"seats": 1}, {"seats": 9}, {"bots_after": -1.0}):
        with pytest.raises(ServerError) as error:
            await ann.request(v1.FindGame(**bad))  # type: ignore[arg-type]
        assert error.value.code == ErrorCode.BAD_MESSAGE
    assert await server.node.store.matchmaking.waiting(0.0) == []


async def test_players_on_two_nodes_share_one_queue_whichever_node_leads(
    make_server, connect, redis_url_clean
) -> None:
    one = await make_server(redis_url=redis_url_clean, node_id="n1")
    two = await make_server(redis_url=redis_url_clean, node_id="n2")
    ann, bob = await connect(one, name="Ann"), await connect(two, name="Bob")
    await ann.find_game(2)
    await bob.find_game(2)
    found = await asyncio.gather(ann.wait_for_match(10), bob.wait_for_match(10))
    assert found[0].table == found[1].table, "one queue across the nodes"
    await seated(bob, found[1])  # through the other node, if the table is not hosted there
    leader = one if one.node.matchmaker.made else two
    follower = two if leader is one else one
    assert leader.node.matchmaker.made == 1 and follower.node.matchmaker.made == 0
    await leader.stop()  # the next matcher takes the lease once it lapses
    cat, dan = await connect(follower, name="Cat"), await connect(follower, name="Dan")
    await cat.find_game(2)
    await dan.find_game(2)
    await asyncio.gather(cat.wait_for_match(10), dan.wait_for_match(10))
    assert follower.node.matchmaker.made == 1


async def test_a_player_whose_node_stops_keeps_their_place_on_another(
    make_server, connect, redis_url_clean
) -> None:
    one = await make_server(redis_url=redis_url_clean, node_id="n1")
    two = await make_server(redis_url=redis_url_clean, node_id="n2")
    urls = [f"ws://127.0.0.1:{server.port}/" for server in (one, two)]
    ann = await connect(one, name="Ann", reconnect=True, also=tuple(urls))
    first = await ann.find_game(2)
    await one.stop()
    await ann.wait_until(lambda: ann.reconnects == 1 and ann.queued is not None, 15)
    assert ann.url == urls[1]
    assert ann.queued.since == first.since, "the place was kept"
    bob = await connect(two, name="Bob")
    await bob.find_game(2)
    found = await ann.wait_for_match(10)
    assert found.players == ["Ann", "Bob"], "Ann came first"


async def test_a_player_queueing_from_many_connections_holds_one_place(server, connect) -> None:
    ann = await connect(server, name="Ann")
    first = await ann.find_game(2)
    copies = []
    for _ in range(5):  # each new connection replaces the one before, and asks again
        copies.append(await connect(server, token=ann.token))
        assert (await copies[-1].find_game(2)).since == first.since
    queue = server.node.store.matchmaking
    assert len(await queue.waiting(0.0)) == 1, "one ticket, whichever connection asked"
    bob = await connect(server, name="Bob")
    await bob.find_game(2)
    found = await copies[-1].wait_for_match(10)
    assert found.players == ["Ann", "Bob"]
    assert await queue.waiting(0.0) == []
