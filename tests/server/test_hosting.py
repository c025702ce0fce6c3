"""Logged hosting: a room rebuilt from its log is the room; failed writes undo; tables move."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from clients.client import Client, ServerError
from protocol import v1
from protocol.errors import ErrorCode
from server.hosting import Entry, decode_entry, replay
from server.stores.base import LeaseLost
from server.testing.redis_server import RedisServer
from tests.server.helpers import play_out, seat_and_start


def same_room(live, rebuilt) -> None:
    assert rebuilt.seq == live.seq
    assert rebuilt.status == live.status
    assert [e.seq for e in rebuilt.log] == [e.seq for e in live.log]
    assert [msgspec.to_builtins(e.event) for e in rebuilt.log] == [
        msgspec.to_builtins(e.event) for e in live.log
    ]
    for seat in [None, *range(len(live.seats))]:
        assert msgspec.to_builtins(rebuilt.snapshot(seat)) == msgspec.to_builtins(
            live.snapshot(seat)
        )


async def test_a_room_rebuilt_from_its_log_is_the_same_room(server, connect) -> None:
    a, b, c = [await connect(server, name=n) for n in "ABC"]
    watcher = await connect(server, name="W")
    table = await seat_and_start(a, [b, c], turn_seconds=1.0)
    await watcher.request(v1.Spectate(table=table))
    room = server.node.rooms[table]
    # a timeout (a logged tick), a departure mid-round, then the others play on
    await a.wait_until(
        lambda: any(e.event["type"] == "timed_out" for e in a.tables[table].events), timeout=5
    )
    same_room(room, replay(await server.store.read_log(table)))
    leaver = next(x for x in (a, b, c) if not x.tables[table].legal)
    await leaver.request(v1.LeaveTable(table=table))
    others = [x for x in (a, b, c) if x is not leaver]
    await asyncio.gather(*(play_out(x, table) for x in others))
    entries = await server.store.read_log(table)
    same_room(room, replay(entries))
    kinds = {type(decode_entry(e).command).__name__ for e in entries}
    assert {"Create", "JoinTable", "SetReady", "StartGame", "Act", "Tick", "LeaveTable"} <= kinds
    acts = [decode_entry(e) for e in entries if isinstance(decode_entry(e).command, v1.Act)]
    assert all(isinstance(entry, Entry) and entry.seq > 0 for entry in acts)


@pytest.fixture
def own_redis(tmp_path):
    with RedisServer(appendonly=True, data_dir=str(tmp_path)) as redis_server:
        yield redis_server


async def test_while_redis_is_down_requests_fail_cleanly_and_change_nothing(
    make_server, connect, own_redis
) -> None:
    server = await make_server(redis_url=own_redis.url)
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=60)
    mover = a if a.tables[table].legal else b
    before = server.node.rooms[table].snapshot(None)
    own_redis.stop()
    with pytest.raises(ServerError) as error:
        await mover.act(table, mover.tables[table].legal[0])
    assert error.value.code == ErrorCode.UNAVAILABLE
    after = server.node.rooms[table].snapshot(None)
    assert msgspec.to_builtins(after) == msgspec.to_builtins(before), "nothing half-applied"
    own_redis.restart()
    for _ in range(50):  # the node recovers by itself
        try:
            await mover.act(table, mover.tables[table].legal[0])
            break
        except ServerError as retry:
            assert retry.code == ErrorCode.UNAVAILABLE
            await asyncio.sleep(0.1)
    else:
        raise AssertionError("the node did not recover")
    await asyncio.gather(play_out(a, table), play_out(b, table))
    same_room(server.node.rooms[table], replay(await server.store.read_log(table)))


async def test_a_node_that_lost_its_lease_stops_hosting(make_server, connect, redis_url_clean):
    import redis.asyncio as aioredis

    server = await make_server(redis_url=redis_url_clean)
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=60)
    async with aioredis.Redis.from_url(redis_url_clean) as direct:
        await direct.set(f"bd:t:{{{table}}}:lease", "some-other-node", px=60_000)
    with pytest.raises(LeaseLost):
        await server.store.append_log(table, b"x")
    mover = a if a.tables[table].legal else b
    with pytest.raises(ServerError) as error:
        await mover.act(table, mover.tables[table].legal[0])
    assert error.value.code == ErrorCode.UNAVAILABLE
    assert table not in server.node.rooms


async def test_a_stopping_node_hands_its_tables_over(make_server, redis_url_clean) -> None:
    first = await make_server(redis_url=redis_url_clean, node_id="leaving")
    second = await make_server(redis_url=redis_url_clean, node_id="staying")
    urls = [f"ws://127.0.0.1:{s.port}/" for s in (first, second)]
    a = await Client.connect(urls[0], name="A", reconnect=True, also=tuple(urls))
    b = await Client.connect(urls[1], name="B", reconnect=True, also=tuple(urls))
    try:
        table = await seat_and_start(a, [b], turn_seconds=60)
        assert table in first.node.rooms
        seq = a.tables[table].seq
        await first.stop()
        await b.wait_until(lambda: table in second.node.rooms, timeout=10)
        await a.wait_until(lambda: a.reconnects == 1, timeout=10)
        await asyncio.gather(play_out(a, table), play_out(b, table))
        assert a.tables[table].view == b.tables[table].view
        assert a.tables[table].view["phase"] == "over"
        seqs = [e.seq for e in a.tables[table].events if e.seq > seq]
        assert seqs == list(range(seq + 1, seqs[-1] + 1)), "no gap across the handover"
        info = a.tables[table].info
        assert all(s is None or s.connected for s in info.seats), "both players are back"
    finally:
        await a.close()
        await b.close()
