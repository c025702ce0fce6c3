"""Old logs stay readable: a table log written by version 0.1.0 is adopted by this version.

``tests/data/blackdrez-log-0.1.0.msgpack`` is frozen: the log (a MessagePack array of the log
entries exactly as stored in Redis) of a two-seat BlackDrez table in the middle of its first
round, written by a 0.1.0 node (players "Old Ann" and "Old Bob", four actions played). It must
never be regenerated: it is what a node of the previous version leaves in Redis during a rolling
upgrade. A new node must replay it and carry the game on to its end with the same players.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from blackdrez.clients.bots import play_table
from blackdrez.clients.client import Client
from blackdrez.server.identity import issue_token
from blackdrez.server.stores.base import Append
from blackdrez.server.stores.redis import redis_stores
from blackdrez.server.table.commands import Create, decode_entry, rebuild
from blackdrez.server.table.records import players_seated

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "blackdrez-log-0.1.0.msgpack"


def golden_log() -> list[bytes]:
    return msgspec.msgpack.decode(GOLDEN.read_bytes(), type=list[bytes])


def test_the_old_log_replays_to_the_same_table() -> None:
    entries = golden_log()
    room = rebuild(entries)
    last = decode_entry(entries[-1])
    assert (room.status, room.seq, last.seq) == ("playing", 19, 19)
    assert room.engine is not None and not room.engine.over
    assert [seat.name for seat in room.seats if seat is not None] == ["Old Ann", "Old Bob"]


async def test_a_new_node_adopts_an_old_nodes_table_and_the_game_ends(
    make_server, redis_url_clean
) -> None:
    entries = golden_log()
    create = decode_entry(entries[0]).command
    assert isinstance(create, Create)
    table = create.table
    # What a 0.1.0 node leaves behind when it hands a table over: the log, the table's
    # record, its lease released.
    old = redis_stores(redis_url_clean, "old-node")
    await old.start()
    try:
        token = await old.leases.acquire(table, 3.0)
        assert token is not None
        for position, entry in enumerate(entries, start=1):
            await old.logs.append(Append(table, token, position, entry))
        record = msgspec.msgpack.encode(rebuild(entries).info())
        await old.lobby.put(table, "old-node", record, True, token)
        await old.leases.release(table, token)
    finally:
        await old.close()
    server = await make_server(redis_url=redis_url_clean, node_id="new-node")
    url = f"ws://127.0.0.1:{server.port}/"
    room = rebuild(entries)
    players = []
    try:
        for player in sorted(players_seated(entries), key=room.seat_of):
            name = room.seats[room.seat_of(player)].name
            session = issue_token(server.secret, player, name)
            client = await Client.connect(url, token=session.text, reconnect=True)
            assert client.player == player
            players.append(client)
        for client in players:
            await client.resync(table)  # answered once the new node has adopted it
            client.tables[table].seat = room.seat_of(client.player)  # as the player knew it
        assert table in server.node.rooms, "the new node adopted the old node's table"
        results = await asyncio.wait_for(
            asyncio.gather(*(play_table(c, table, timeout=60) for c in players)), 90
        )
    finally:
        for client in players:
            await client.close()
    assert all(r.final is not None and r.final["phase"] == "over" for r in results)
    assert all(r.fair for r in results), [r.problem for r in results]
