"""Logged hosting: a room rebuilt from its log is the room; failed writes undo; tables move."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

import msgspec
import pytest

from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.app import GameServer
from blackdrez.server.node.hosting import HeldLock, TableLock
from blackdrez.server.node.routing import REMOTE_TIMEOUT
from blackdrez.server.stores.base import Append, LeaseLost, Settled
from blackdrez.server.table.commands import LogEntry, Resume, decode_entry, rebuild
from blackdrez.server.table.records import decode_table_record, record_log
from blackdrez.server.table.room import Broadcast, Room
from blackdrez.server.testing.nodes import lease_holders
from blackdrez.server.testing.redis_server import RedisServer
from tests.server.helpers import play_out, player_on_turn, queued_at, seat_and_start, wait_for


def same_room(live, rebuilt) -> None:
    assert rebuilt.seq == live.seq
    assert rebuilt.status == live.status
    assert [e.seq for e in rebuilt.log.kept_events()] == [e.seq for e in live.log.kept_events()]
    assert [msgspec.to_builtins(e.event) for e in rebuilt.log.kept_events()] == [
        msgspec.to_builtins(e.event) for e in live.log.kept_events()
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
    same_room(room, rebuild(await server.store.logs.read(table)))
    leaver = next(x for x in (a, b, c) if not x.tables[table].legal)
    await leaver.request(v1.LeaveTable(table=table))
    others = [x for x in (a, b, c) if x is not leaver]
    await asyncio.gather(*(play_out(x, table) for x in others))
    entries = await server.store.logs.read(table)
    same_room(room, rebuild(entries))
    kinds = {type(decode_entry(e).command).__name__ for e in entries}
    assert {"Create", "JoinTable", "SetReady", "StartGame", "Act", "Tick", "LeaveTable"} <= kinds
    acts = [decode_entry(e) for e in entries if isinstance(decode_entry(e).command, v1.Act)]
    assert all(isinstance(entry, LogEntry) and entry.seq > 0 for entry in acts)


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
    mover = await player_on_turn([a, b], table)
    before = server.node.rooms[table].snapshot(None)
    own_redis.stop()
    with pytest.raises(ServerError) as error:
        await mover.act(table, mover.tables[table].legal[0])
    assert error.value.code == ErrorCode.UNAVAILABLE
    after = server.node.rooms[table].snapshot(None)
    assert msgspec.to_builtins(after) == msgspec.to_builtins(before), "nothing half-applied"
    own_redis.restart()
    for _ in range(50):  # the node recovers by itself
        # An outage longer than the lease moves the table (here, back to this node): its
        # players see it resumed, and the one on turn has the turn again.
        legal = mover.tables[table].legal
        try:
            if legal:
                await mover.act(table, legal[0])
                break
        except ServerError as retry:
            assert retry.code == ErrorCode.UNAVAILABLE
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the node did not recover")
    await asyncio.gather(play_out(a, table), play_out(b, table))
    same_room(server.node.rooms[table], rebuild(await server.store.logs.read(table)))


def kept_for(node, table: str) -> list[str]:
    """What ``node`` still keeps for ``table``, by attribute: nothing, once it hosts it no more
    and nothing is under way for it (a lock included: a table that moves away must not leave
    one behind for the node's lifetime)."""
    hosting = node.hosting
    per_table = {
        "rooms": hosting.rooms,
        "leases": hosting.leases.held,
        "locks": hosting._locks,
        "command_logs": hosting._command_logs,
        "snapshots": hosting._snapshots,
        "timers": hosting._timers,
        "retry_at": hosting._retry_at,
        "hint_buckets": hosting._hint_buckets,
        "bots_named": hosting.bots._named,
        "bots_coming": hosting.bots.coming,
        "ratings_wanted": hosting._ratings_wanted,
        "viewed_from": hosting._viewed_from,
    }
    return [name for name, kept in per_table.items() if table in kept]


async def test_a_node_that_lost_its_lease_stops_hosting(make_server, connect, redis_url_clean):
    import redis.asyncio as aioredis

    server = await make_server(redis_url=redis_url_clean)
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=60)
    # The token first: the node's next renewal (4 a second) finds the lease gone and forgets it.
    token = server.node.hosting.leases.held[table].token
    async with aioredis.Redis.from_url(redis_url_clean) as direct:
        await direct.set(f"bd:t:{{{table}}}:lease", "some-other-node/0/99", px=60_000)
    position = len(await server.store.logs.read(table)) + 1
    with pytest.raises(LeaseLost):
        await server.store.logs.append(Append(table, token, position, b"x"))
    mover = await player_on_turn([a, b], table)
    act = v1.Act(table=table, action=mover.tables[table].legal[0])
    async with asyncio.timeout(5):  # the renewal finds the lease gone
        while table in server.node.rooms or server.node.routing.live is None:
            await asyncio.sleep(0.05)
    # Its lease names a node that is not heartbeating: the player hears ``moving`` at once, not
    # after waiting REMOTE_TIMEOUT for that node to answer.
    sent = time.monotonic()
    with pytest.raises(ServerError) as error:
        await mover.request(act, moving_patience=0)  # not waiting for the table to move
    assert error.value.code == ErrorCode.MOVING
    assert time.monotonic() - sent < REMOTE_TIMEOUT / 3
    assert kept_for(server.node, table) == []


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
        assert kept_for(first.node, table) == []
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


async def test_a_stopping_node_adopts_none_of_the_tables_it_hands_over(
    make_server, redis_url_clean
) -> None:
    server = await make_server(redis_url=redis_url_clean, node_id="leaving")
    url = f"ws://127.0.0.1:{server.port}/"
    a = await Client.connect(url, name="A")
    b = await Client.connect(url, name="B")
    try:
        table = await seat_and_start(a, [b], turn_seconds=60)
        node = server.node
        # An orphan scan that the stop cannot cancel: redis-py, on Python 3.11, lets a
        # cancellation that lands during a command go unnoticed now and then (about one in
        # five, measured), and the scan heard its own node's handover.
        scan = asyncio.create_task(node.failover.adopt_orphans())
        await node.stop()
        # scans run every sixth of the TTL while tables move
        await asyncio.sleep(node.hosting.leases.ttl)
        assert table not in node.rooms, "the stopping node adopted a table it handed over"
        assert lease_holders(redis_url_clean) == {}
        scan.cancel()
    finally:
        await a.close()
        await b.close()


async def test_every_log_entry_records_the_event_number_after_it(
    make_server, redis_url_clean
) -> None:
    first = await make_server(redis_url=redis_url_clean, node_id="leaving")
    second = await make_server(redis_url=redis_url_clean, node_id="staying")
    urls = [f"ws://127.0.0.1:{s.port}/" for s in (first, second)]
    a = await Client.connect(urls[0], name="A", reconnect=True, also=tuple(urls))
    b = await Client.connect(urls[1], name="B", reconnect=True, also=tuple(urls))
    try:
        table = await seat_and_start(a, [b], turn_seconds=60)
        await first.stop()  # the second node adopts the table: a resume, seats away
        await b.wait_until(lambda: table in second.node.rooms, timeout=10)
        entries = await second.store.logs.read(table)
    finally:
        await a.close()
        await b.close()
    resumes = [i for i, e in enumerate(entries) if isinstance(decode_entry(e).command, Resume)]
    assert resumes, "the table was adopted"
    for index in range(1, len(entries)):
        logged = decode_entry(entries[index])
        after = rebuild(entries[: index + 1]).seq
        assert logged.seq == after, f"entry {index} ({type(logged.command).__name__})"


async def test_a_closed_table_refuses_everything_at_once(
    make_server, connect, redis_url_clean
) -> None:
    server = await make_server(redis_url=redis_url_clean)
    host = await connect(server, name="Host")
    bot = await connect(server, name="Bot", client_name="blackdrez-bot/test")
    table = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=2)))).table.id
    await bot.request(v1.JoinTable(table=table))
    # The host's leave closes the table (only a bot is left); the bot's leave queued behind it.
    async with server.node.hosting.lock(table):
        leaving = asyncio.create_task(host.request(v1.LeaveTable(table=table)))
        await queued_at(server.node, table, 1)
        late = asyncio.create_task(bot.request(v1.LeaveTable(table=table)))
        await queued_at(server.node, table, 2)
    await leaving
    with pytest.raises(ServerError) as error:
        await late
    assert error.value.code == ErrorCode.NOT_FOUND
    assert table not in server.node.rooms
    await server.node._settled()
    record = decode_table_record(await server.store.logs.game_record(table))
    commands = [decode_entry(e).command for e in record_log(record)]
    assert isinstance(commands[-1], v1.LeaveTable), "nothing logged after the close"
    assert rebuild(record_log(record)).status == "closed"
    with pytest.raises(ServerError) as error:
        await bot.request(v1.Resync(table=table))
    assert error.value.code == ErrorCode.NOT_FOUND
    assert kept_for(server.node, table) == [], "a retired table leaves nothing on its node"


async def test_an_action_logged_while_its_lease_is_found_lost_is_acknowledged_not_a_crash(
    make_server, connect, redis_url_clean
):
    """The renewal loop may find a lease lost while an append of the same table is in flight
    (it landed just before the lease lapsed): the append succeeded, so the action is logged and
    acknowledged, and the node, which no longer hosts the table, leaves the rest to the next
    host instead of failing the request."""
    server = await make_server(redis_url=redis_url_clean)
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=60)
    store, node = server.store, server.node
    real_append = store.logs.append

    real_append_soon = store.logs.append_soon

    async def append_then_lose(append: Append) -> bool:
        heard = await real_append(append)
        # the renewal's verdict, processed before this write's reply
        node.hosting.drop_lost_table(append.table_id)
        return heard

    def append_soon_then_lose(append: Append, settled: Settled) -> None:
        def lose_then_settle(outcome: bool | BaseException) -> None:
            node.hosting.drop_lost_table(append.table_id)  # (as above: the action's path)
            settled(outcome)

        real_append_soon(append, lose_then_settle)

    # (installed once a player is on turn: a round won on the deal is followed by the next
    # round's start, a logged system action, which must not be the one that loses the table)
    mover = await player_on_turn([a, b], table)
    store.logs.append = append_then_lose  # type: ignore[method-assign]
    store.logs.append_soon = append_soon_then_lose  # type: ignore[method-assign]
    logged = len(await store.logs.read(table))
    ok = await mover.act(table, mover.tables[table].legal[0])
    assert isinstance(ok, v1.Ok)
    assert len(await store.logs.read(table)) == logged + 1
    assert table not in node.rooms


async def test_an_action_whose_append_fails_after_its_lease_is_found_lost_is_refused_cleanly(
    make_server, connect, own_redis
):
    """The other order of the same race, in a Redis outage (a restart): the renewal loop drops
    the table while its append is in flight, then the append fails. There is no room left to
    undo the command in: the request gets a typed refusal (the table is moving), not
    ``internal``, and the table comes back by adoption."""
    server = await make_server(redis_url=own_redis.url)
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=60)
    store, node = server.store, server.node
    real_append = store.logs.append

    real_append_soon = store.logs.append_soon

    async def lose_then_fail(append: Append) -> bool:
        node.hosting.drop_lost_table(append.table_id)  # the renewal's verdict, while it is out
        await asyncio.to_thread(own_redis.stop)
        return await real_append(append)

    def lose_then_fail_soon(append: Append, settled: Settled) -> None:
        node.hosting.drop_lost_table(append.table_id)  # (as above: the action's path)
        own_redis.stop()
        real_append_soon(append, settled)

    mover = await player_on_turn([a, b], table)  # (then the patch: see the test above)
    store.logs.append = lose_then_fail  # type: ignore[method-assign]
    store.logs.append_soon = lose_then_fail_soon  # type: ignore[method-assign]
    act = v1.Act(table=table, action=mover.tables[table].legal[0])
    with pytest.raises(ServerError) as error:
        await mover.request(act, moving_patience=0)
    assert error.value.code in (ErrorCode.UNAVAILABLE, ErrorCode.MOVING)
    store.logs.append = real_append  # type: ignore[method-assign]
    store.logs.append_soon = real_append_soon  # type: ignore[method-assign]
    own_redis.start()
    async with asyncio.timeout(30):  # adopted again from its log (here: by the same node)
        while table not in node.rooms or not (a.tables[table].legal or b.tables[table].legal):
            await asyncio.sleep(0.05)
    await asyncio.gather(play_out(a, table), play_out(b, table))
    assert node.rooms[table].engine.over


async def test_a_connections_answers_keep_the_order_of_its_requests_an_action_out_too(
    make_server, connect, own_redis
) -> None:
    """On Redis an action is answered from the callback that reads its append's reply
    (``Hosting.act_soon``), not by its request's coroutine, and the connection reads on
    meanwhile: its next request waits for that answer, so a client's requests are answered in
    the order it sent them (here a ``ping`` sent right after an action, while Redis holds the
    action's append: without the wait, the ``pong`` came first)."""
    server = await make_server(redis_url=own_redis.url)
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=60)
    mover = await player_on_turn([a, b], table)
    order: list[str] = []

    async def asked(name: str, request: Awaitable[object]) -> None:
        await request
        order.append(name)

    own_redis.pause()
    try:
        acting = asyncio.create_task(asked("act", mover.act(table, mover.tables[table].legal[0])))
        await asyncio.sleep(0.05)
        pinging = asyncio.create_task(asked("ping", mover.request(v1.Ping())))
        await asyncio.sleep(0.3)
        assert order == []  # the action is out to Redis: the ping waits for its answer
    finally:
        own_redis.resume()
    await asyncio.wait_for(asyncio.gather(acting, pinging), 10)
    assert order == ["act", "ping"]
    # The action's lock is freed by its answer: a timer due meanwhile (the table's tick, after
    # the stall) may hold the table's lock a moment, so "freed" is "soon", never "at once".
    locks = server.node.hosting._locks
    await wait_for(lambda: table not in locks, "the action's lock freed", timeout=5)


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_an_action_whose_aftermath_fails_is_answered_and_its_connection_reads_on(
    make_server, connect, own_redis, monkeypatch, store: str
) -> None:
    """A bug after an action's entry is logged (here its update's fan-out raises once) still
    answers the action (``internal``, as any request that fails) and the connection serves its
    next request; the table's lock is free and the table plays on. Served from the append's
    callback, the action left its connection waiting for an answer that never came (every
    request it sent after hung) while only a log line told.

    The action is a withdrawal that ends the round (two seats): the next deal comes only by the
    room's timer, which the failed aftermath had not set (CI met it when the failing action was
    a hit that bust: the table waited for good)."""
    server = await make_server(redis_url=own_redis.url if store == "redis" else None)
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=60, round_pause_seconds=1.0)
    mover = await player_on_turn([a, b], table)
    hosting = server.node.hosting
    real_fan_out = hosting.fanout.fan_out
    failures = []

    def fan_out_once_failing(broadcast: Broadcast) -> None:
        if not failures:
            failures.append(broadcast)
            raise RuntimeError("a bug in the aftermath")
        real_fan_out(broadcast)

    monkeypatch.setattr(hosting.fanout, "fan_out", fan_out_once_failing)
    withdraw = next(a for a in mover.tables[table].legal if a["type"] == "withdraw")
    with pytest.raises(ServerError) as error:
        await mover.act(table, withdraw)
    assert error.value.code == ErrorCode.INTERNAL
    assert len(failures) == 1
    assert isinstance(await asyncio.wait_for(mover.request(v1.Ping()), 5), v1.Pong)
    assert table not in hosting._locks
    room = hosting.rooms[table]
    assert room.engine.state.phase == "between_rounds"
    assert table in hosting._timers  # the next deal is due
    await a.resync(table)  # (the update was not sent: the players look again)
    await b.resync(table)
    await asyncio.wait_for(asyncio.gather(play_out(a, table), play_out(b, table)), 30)
    assert room.engine.over


async def test_a_lobby_change_is_written_with_its_log_entry_not_after(
    make_server, connect, redis_url_clean
) -> None:
    """A command that changes what the lobby shows (most BlackDrez actions do) writes the table's
    record and announces it in the same store call as its log entry, not as three more calls
    from the outbox: the record is current as soon as the command is answered."""
    server = await make_server(redis_url=redis_url_clean)
    a, b, watcher = [await connect(server, name=n) for n in "ABW"]
    await watcher.request(v1.WatchLobby())
    joined = await a.request(v1.CreateTable(options=v1.TableOptions(seats=2)))
    table = joined.table.id
    await server.node._settled()  # the creation's own record write is done
    writes: list[str] = []
    put_table = server.store.lobby.put

    async def counted(table_id: str, *args, **kwargs) -> None:
        writes.append(table_id)
        await put_table(table_id, *args, **kwargs)

    server.store.lobby.put = counted
    await b.request(v1.JoinTable(table=table))
    _, record = await server.store.lobby.get(table)
    info = msgspec.msgpack.decode(record, type=v1.TableInfo)
    assert [seat.name for seat in info.seats if seat is not None] == ["A", "B"]
    await watcher.wait_until(
        lambda: table in watcher.lobby and None not in watcher.lobby[table].seats
    )
    await server.node._settled()
    assert writes == [], "the outbox wrote the record again"


async def test_watching_the_lobby_while_redis_is_down_is_refused_then_works_once_it_is_back(
    make_server, connect, own_redis
) -> None:
    """The lobby channel is subscribed when the first watcher comes: with Redis down that
    watcher hears ``unavailable`` and is not counted as watching; once Redis is back it can
    watch, and hears the lobby's changes."""
    server = await make_server(redis_url=own_redis.url)
    watcher, host = [await connect(server, name=n) for n in ("W", "H")]
    own_redis.stop()
    with pytest.raises(ServerError) as error:
        await watcher.request(v1.WatchLobby())
    assert error.value.code == ErrorCode.UNAVAILABLE
    assert not server.node.lobby.watchers and not server.node.lobby._heard
    own_redis.restart()
    async with asyncio.timeout(15):
        while True:
            try:
                await watcher.request(v1.WatchLobby())
                break
            except ServerError as retry:
                assert retry.code == ErrorCode.UNAVAILABLE
                await asyncio.sleep(0.2)
    table = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=2)))).table.id
    await watcher.wait_until(lambda: table in watcher.lobby)


async def test_a_tables_lock_lives_while_used_and_is_never_two_at_once() -> None:
    locks: dict[str, TableLock] = {}
    order: list[str] = []
    first_in = asyncio.Event()

    async def command(name: str, hold: float) -> None:
        async with HeldLock(locks, "t1"):
            order.append(f"{name} in")
            first_in.set()
            await asyncio.sleep(hold)
            order.append(f"{name} out")

    first = asyncio.create_task(command("first", 0.05))
    await first_in.wait()
    cancelled = asyncio.create_task(command("cancelled", 0))
    second = asyncio.create_task(command("second", 0))
    await asyncio.sleep(0.01)
    assert locks["t1"].users == 3  # one holder, two waiting
    cancelled.cancel()
    await asyncio.sleep(0)
    assert locks["t1"].users == 2
    await asyncio.gather(first, second)
    assert order == ["first in", "first out", "second in", "second out"]
    assert locks == {}, "nobody holds or awaits it: it is gone"
    async with HeldLock(locks, "t1"):  # and made again for the next command
        assert locks["t1"].users == 1
    assert locks == {}


async def test_a_command_cancelled_once_handed_the_lock_passes_it_on() -> None:
    """The holder lets go, the lock passes to the first in line, and that command is cancelled
    before it runs: the next in line gets the lock, and nobody is left waiting."""
    locks: dict[str, TableLock] = {}
    order: list[str] = []
    release = asyncio.Event()

    async def command(name: str) -> None:
        async with HeldLock(locks, "t1"):
            order.append(name)

    async def first() -> None:
        async with HeldLock(locks, "t1"):
            order.append("first")
            await release.wait()
        # let go: the lock is the next in line's, which has not run yet
        assert locks["t1"].users == 2
        handed.cancel()

    holder = asyncio.create_task(first())
    await asyncio.sleep(0)
    handed = asyncio.create_task(command("handed"))
    after = asyncio.create_task(command("after"))
    await asyncio.sleep(0)
    assert locks["t1"].users == 3
    release.set()
    await asyncio.wait_for(asyncio.gather(holder, after), 1)
    assert handed.cancelled()
    assert order == ["first", "after"]
    assert locks == {}


async def seated_and_watching_through(
    hosting: GameServer, via: GameServer
) -> tuple[Room, list[Client]]:
    """A table hosted on ``hosting``: its host, Pat seated and Sam spectating through ``via``."""
    host = await Client.connect(f"ws://127.0.0.1:{hosting.port}/", name="Host")
    pat = await Client.connect(f"ws://127.0.0.1:{via.port}/", name="Pat")
    sam = await Client.connect(f"ws://127.0.0.1:{via.port}/", name="Sam")
    options = v1.TableOptions(seats=3, grace_seconds=0.5)
    table = (await host.request(v1.CreateTable(options=options))).table.id
    await pat.request(v1.JoinTable(table=table))
    await sam.request(v1.Spectate(table=table))
    room = hosting.node.rooms[table]
    assert room.seat_of(pat.player) == 1 and room.spectators == {sam.player}
    return room, [host, pat, sam]


async def test_viewers_whose_node_stopped_are_away_at_a_table_hosted_elsewhere(
    make_server, redis_url_clean
) -> None:
    """A table hosted on one node, a player seated and another spectating through a second
    node, which stops (a stopping node leaves the presence of its viewers to the tables'
    hosts; a killed one says nothing at all). The host must count the player away, free the
    seat after the grace and let the spectator go; before, the seat stayed held, the
    spectator counted and the table open for ever."""
    hosting = await make_server(redis_url=redis_url_clean, node_id="hosting")
    via = await make_server(redis_url=redis_url_clean, node_id="via")
    room, (host, pat, sam) = await seated_and_watching_through(hosting, via)
    try:
        await via.stop()

        def let_go() -> bool:
            return room.seat_of(pat.player) is None and not room.spectators

        await wait_for(let_go, "the stopped node's viewers let go", timeout=15.0)
        assert room.seat_of(host.player) == 0 and not room.closed
    finally:
        for client in (host, pat, sam):
            await client.close()


@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_viewers_of_a_node_restarted_under_its_id_are_away_at_a_table_hosted_elsewhere(
    make_server, request: pytest.FixtureRequest, kind: str
) -> None:
    """As above, but the second node is started again at once under the same node id (as a
    supervisor does with ``--node-id``), within the heartbeat TTL: its node id never stops
    heartbeating, only its process changed. The host must still count the player away and let
    the spectator go, well before the TTL would have lapsed; before, the new process's heartbeat
    hid the old one's death and the seat stayed held for ever."""
    url = request.getfixturevalue(
        "redis_url_clean" if kind == "redis" else "redis_cluster_url_clean"
    )
    ttl = 10.0  # the old process's heartbeat outlives the test's wait
    hosting = await make_server(redis_url=url, node_id="hosting", lease_ttl=ttl)
    via = await make_server(redis_url=url, node_id="via", lease_ttl=ttl)
    room, (host, pat, sam) = await seated_and_watching_through(hosting, via)
    try:
        await via.stop()
        stopped = time.monotonic()
        again = await make_server(redis_url=url, node_id="via", lease_ttl=ttl)
        assert again.store.incarnation != via.store.incarnation

        def let_go() -> bool:
            return room.seat_of(pat.player) is None and not room.spectators

        await wait_for(let_go, "the restarted node's earlier viewers let go", timeout=ttl * 0.7)
        assert time.monotonic() - stopped < ttl, "let go by the lapse, not the restart"
        assert room.seat_of(host.player) == 0 and not room.closed
    finally:
        for client in (host, pat, sam):
            await client.close()


async def test_the_action_histogram_counts_the_wait_for_the_tables_lock(
    make_server, connect
) -> None:
    """``blackdrez_action_seconds`` is what the player waits: an action queued behind another
    command of its table (here the lock held 0.3 s) counts its wait too. Before, the clock
    started once the lock was taken, and this action showed as taking microseconds."""
    server = await make_server()
    host, guest = await connect(server, name="Host"), await connect(server, name="Guest")
    table = await seat_and_start(host, [guest])
    mover = await player_on_turn([host, guest], table)
    move = mover.tables[table].legal[0]

    def total() -> float:
        server.metrics.fold()  # (what a scrape does first)
        return server.metrics.registry.get_sample_value("blackdrez_action_seconds_sum") or 0.0

    before = total()
    async with server.node.hosting.lock(table):
        acting = asyncio.create_task(mover.act(table, move))
        await queued_at(server.node, table, 1)
        await asyncio.sleep(0.3)
    await acting
    assert total() - before >= 0.3
