"""A node alone on its store (the in-memory lobby, the README's default) cannot lose its tables
to another node, so a stall must not make it drop and re-adopt them (its players would be told
``moving``); on a shared store the short lease stays, for fast failovers."""

from __future__ import annotations

import asyncio
import time

from blackdrez.protocol import v1
from blackdrez.server import node


async def test_a_node_alone_on_its_store_keeps_its_tables_through_a_stall(
    make_server, connect
) -> None:
    server = await make_server()
    ann = await connect(server, name="Ann")
    table = (await ann.request(v1.StartSolitaire(game="blackjack_piles"))).table.id
    room = server.node.rooms[table]
    time.sleep(3 * node.LEASE_TTL)  # the event loop stalls: no renewal runs for three short leases
    await asyncio.sleep(node.LEASE_TTL)  # then the renewals and the orphan scan get their turn
    assert server.node.rooms.get(table) is room, "the table was dropped and adopted again"
    legal = [a for a in ann.tables[table].legal if a["type"] not in ("end_round", "resign")]
    reply = await ann.act(table, legal[0])
    assert reply.seq > 0


async def test_the_short_lease_stays_on_a_shared_store(make_server, redis_url_clean) -> None:
    alone = await make_server()
    shared = await make_server(redis_url=redis_url_clean)
    assert alone.node.hosting.leases.ttl == node.SOLE_LEASE_TTL > 10 * node.LEASE_TTL
    assert shared.node.hosting.leases.ttl == node.LEASE_TTL
