"""Dropped connections: the seat is kept, missed events are replayed, timers stand in."""

from __future__ import annotations

import asyncio

import pytest

from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.table import history
from tests.server.helpers import play_out, player_on_turn, seat_and_start


async def reconnect(server, old: Client, **options) -> Client:
    return await Client.connect(f"ws://127.0.0.1:{server.port}/", token=old.token, **options)


async def test_reconnect_mid_turn_replays_exactly_the_missed_events(server, connect) -> None:
    a, b, c = [await connect(server, name=n) for n in "ABC"]
    table = await seat_and_start(a, [b, c], turn_seconds=30)
    await play_several(a, b, c, table, turns=2)
    dropped = await player_on_turn([a, b, c], table)
    others = [x for x in (a, b, c) if x is not dropped]
    held = dropped.tables[table].seq
    held_events = list(dropped.tables[table].events)
    await dropped.close()
    watcher = others[0]
    await watcher.wait_until(
        lambda: any(
            e.event.get("type") == "presence" and not e.event["connected"]
            for e in watcher.tables[table].events
        )
    )
    back = await reconnect(server, dropped)
    assert back.welcome.tables == [table]
    back.tables[table] = dropped.tables[table]  # what the client kept across the drop
    reply = await back.resync(table)
    assert isinstance(reply, v1.Update)
    state = back.tables[table]
    replayed = [e.seq for e in reply.events]
    assert replayed == list(range(held + 1, held + 1 + len(replayed))), "no gap, no duplicate"
    assert state.seq == replayed[-1]
    seqs = [e.seq for e in state.events]
    assert seqs == list(range(seqs[0], state.seq + 1)), "the history has no gap or duplicate"
    assert state.legal, "still this player's turn after coming back"
    assert state.seat == dropped.tables[table].seat
    assert [e.seq for e in held_events] == list(range(held - len(held_events) + 1, held + 1))
    # the game then finishes normally with the returned player
    await asyncio.gather(*(play_out(x, table) for x in (back, *others)))


async def play_several(a, b, c, table, turns: int) -> None:
    for _ in range(turns):
        player = await player_on_turn([a, b, c], table)
        seq = player.tables[table].seq
        await player.act(
            table, {"type": "hit"} if player.tables[table].view["stock"] else {"type": "withdraw"}
        )
        for x in (a, b, c):
            await x.wait_until(lambda x=x, seq=seq: x.tables[table].seq > seq)
        if all(not x.tables[table].legal for x in (a, b, c)):
            await asyncio.sleep(0.05)


async def test_too_many_missed_events_give_a_snapshot(server, connect, monkeypatch) -> None:
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b])
    room = server.node.rooms[table]
    room.log.kept = type(room.log.kept)(room.log.kept, maxlen=3)
    await b.close()
    state = a.tables[table]
    while len(room.log.kept) == 3 and room.log.first_kept <= b.tables[table].seq + 1:
        seq = state.seq
        await a.request(v1.SetReady(table=table, ready=not room.seats[state.seat].ready))
        await a.wait_until(lambda s=seq: state.seq > s)
    back = await reconnect(server, b)
    reply = await back.resync(table)
    assert isinstance(reply, v1.Snapshot)
    assert reply.seq == room.seq
    assert back.tables[table].view == a.tables[table].view
    assert history.KEPT_EVENTS >= 64


async def test_an_absent_player_on_turn_is_withdrawn_by_the_timer(server, connect) -> None:
    a, b, c = [await connect(server, name=n) for n in "ABC"]
    table = await seat_and_start(a, [b, c], turn_seconds=1.0)
    sleeper = await player_on_turn([a, b, c], table)
    seat = sleeper.tables[table].seat
    deadline = sleeper.tables[table].deadline
    assert deadline is not None
    await sleeper.close()
    watcher = next(x for x in (a, b, c) if x is not sleeper)
    timed_out = await watcher.wait_until(
        lambda: next(
            (e.event for e in watcher.tables[table].events if e.event["type"] == "timed_out"),
            None,
        ),
        timeout=5,
    )
    assert timed_out["seat"] == seat
    assert timed_out["action"] == {"type": "withdraw"}
    assert any(
        e.event["type"] == "withdrew" and e.event["seat"] == seat
        for e in watcher.tables[table].events
    )


async def test_a_connected_player_who_does_not_act_is_withdrawn(server, connect) -> None:
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=1.0)
    idle = await player_on_turn([a, b], table)
    seat = idle.tables[table].seat
    await idle.wait_until(
        lambda: any(e.event["type"] == "timed_out" for e in idle.tables[table].events),
        timeout=5,
    )
    withdrew = [e.event for e in idle.tables[table].events if e.event["type"] == "withdrew"]
    assert withdrew and withdrew[0]["seat"] == seat


@pytest.mark.parametrize("grace", [0.5])
async def test_a_seat_is_freed_after_the_grace_period(server, connect, grace) -> None:
    host, guest = [await connect(server, name=n) for n in ("Host", "Guest")]
    joined = await host.request(
        v1.CreateTable(options=v1.TableOptions(seats=3, grace_seconds=grace))
    )
    table = joined.table.id
    await guest.request(v1.JoinTable(table=table))
    await guest.close()
    state = host.tables[table]
    await host.wait_until(lambda: state.info.seats[1] is None, timeout=5)
    freed = [e.event for e in state.events if e.event["type"] == "seat_freed"]
    assert freed == [{"type": "seat_freed", "seat": 1, "reason": "timeout"}]


async def test_the_client_library_reconnects_and_resyncs_by_itself(server, connect) -> None:
    a = await connect(server, name="A", reconnect=True)
    b = await connect(server, name="B", reconnect=True)
    table = await seat_and_start(a, [b])
    await a.drop()
    await b.drop()
    await a.wait_until(lambda: a.reconnects == 1)
    await b.wait_until(lambda: b.reconnects == 1)
    await asyncio.gather(play_out(a, table), play_out(b, table))
    for client in (a, b):
        seqs = [e.seq for e in client.tables[table].events]
        assert seqs == list(range(seqs[0], seqs[-1] + 1)), "no gap, no duplicate"
    assert a.tables[table].view == b.tables[table].view


async def test_the_client_library_waits_out_a_node_that_is_still_starting(server, connect) -> None:
    """A node started again at its address answers every handshake with 503 until its store
    answers and it has started (``GameServer.ready``): a reconnecting client keeps trying
    until it is let in, then resyncs. (It used to stop reading at the first 503, neither
    connected nor closed, and its game stalled: the same-id restart of the fault suite.)"""
    a = await connect(server, name="A", reconnect=True)
    b = await connect(server, name="B", reconnect=True)
    table = await seat_and_start(a, [b])
    server.ready = False  # what a restarted node answers while it starts
    await a.drop()
    await asyncio.sleep(2.0)  # several tries, each refused with 503
    assert a.reconnects == 0 and not a.closed.done(), "still trying while the node starts"
    server.ready = True
    await a.wait_until(lambda: a.reconnects == 1, timeout=20)
    await asyncio.gather(play_out(a, table), play_out(b, table))
    assert a.tables[table].view == b.tables[table].view
