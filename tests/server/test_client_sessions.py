"""The Python client library as a bot author meets it: many requests at once stay within the
server's limit, a saved session comes back to its seat, and a connection dropped with a move in
flight neither hides the loss nor leaves stale legal actions to act on."""

from __future__ import annotations

import asyncio

import pytest

from blackdrez.clients.client import Client, ConnectionLost
from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode, ErrorCode


async def test_many_requests_at_once_are_paced_to_the_announced_limit(make_server, connect) -> None:
    server = await make_server(messages_per_second=20.0, burst=10)
    paced = await connect(server, name="Paced")
    replies = await asyncio.gather(*(paced.request(v1.Ping()) for _ in range(40)))
    assert all(isinstance(reply, v1.Pong) for reply in replies)
    assert not paced.closed.done()
    assert server.metrics.errors.labels("rate_limited")._value.get() == 0


async def test_without_pacing_the_same_requests_are_refused_and_the_connection_closed(
    make_server, connect
) -> None:
    """What the pacing saves: the refused requests' retries all come back at the same moment,
    and the refusals pass the flood limit."""
    server = await make_server(messages_per_second=20.0, burst=10)
    unpaced = await connect(server, name="Unpaced", pace=False)
    replies = await asyncio.gather(
        *(unpaced.request(v1.Ping()) for _ in range(40)), return_exceptions=True
    )
    assert any(isinstance(reply, ConnectionError) for reply in replies)
    code, _ = await unpaced.closed
    assert code == CloseCode.POLICY_VIOLATION


async def two_at_a_table(connect, server) -> tuple[Client, Client, str]:
    """Ann hosts a two-seat table with a long turn, Bob sits down, the game starts."""
    ann = await connect(server, name="Ann", reconnect=True)
    bob = await connect(server, name="Bob", reconnect=True)
    options = v1.TableOptions(seats=2, turn_seconds=300, round_pause_seconds=0)
    table = (await ann.request(v1.CreateTable(options=options))).table.id
    await bob.request(v1.JoinTable(table=table))
    await bob.request(v1.SetReady(table=table))
    await ann.request(v1.StartGame(table=table))
    for client in (ann, bob):
        await client.wait_until(lambda c=client: c.tables[table].view is not None)
    await ann.wait_until(lambda: ann.tables[table].legal or bob.tables[table].legal)
    return ann, bob, table


async def test_a_saved_session_resyncs_its_table_back_to_its_seat(make_server, connect) -> None:
    server = await make_server()
    ann, _bob, table = await two_at_a_table(connect, server)
    seat, legal = ann.tables[table].seat, ann.tables[table].legal
    await ann.close()
    again = await connect(server, token=ann.token)  # a new process with the saved token
    assert again.welcome.tables == [table]
    await again.resync(table)
    state = again.tables[table]
    assert state.seat == seat is not None
    assert state.view["seats"][seat]["hand"], "its hand in the view"
    assert state.legal == legal


async def test_a_move_in_flight_when_the_connection_drops_raises_and_waits_for_the_resync(
    make_server, connect
) -> None:
    server = await make_server()
    ann, bob, table = await two_at_a_table(connect, server)
    mine, other = (ann, bob) if ann.tables[table].legal else (bob, ann)
    state = mine.tables[table]
    move = asyncio.ensure_future(mine.act(table, {"type": "hit"}))
    await asyncio.sleep(0)  # the act is sent, its reply not read yet
    await mine.drop()
    with pytest.raises(ConnectionLost):
        await move
    assert state.legal == [], "stale legal actions are not offered across the drop"
    await mine.wait_until(lambda: mine.reconnects == 1, 10)
    await mine.wait_until(lambda: state.seq == other.tables[table].seq and state.view, 10)
    fresh = await mine.resync(table)
    assert state.legal == fresh.legal and state.view == fresh.view, "the server's now"


async def test_an_error_answering_a_frame_sent_by_hand_is_kept_in_pushed(
    make_server, connect
) -> None:
    server = await make_server()
    client = await connect(server, name="Raw")
    await client.ws.send('{"type": "join", "id": 1000000, "table": "tnope"}')
    await client.wait_until(lambda: any(isinstance(m, v1.Error) for m in client.pushed))
    (error,) = [m for m in client.pushed if isinstance(m, v1.Error)]
    assert error.id == 1000000 and error.code == "not_found"
    assert isinstance(await client.request(v1.Ping()), v1.Pong), "the client goes on"


async def test_a_table_left_is_not_resynced_after_a_reconnection(make_server, connect) -> None:
    """A client resynced every table it ever held after reconnecting, the ones it had left
    included: the server answered each with an error (a closed table: ``not_found``)."""
    server = await make_server()
    ann = await connect(server, name="Ann", reconnect=True)
    left = (await ann.request(v1.CreateTable())).table.id
    await ann.request(v1.LeaveTable(table=left))  # alone at it: it closes
    kept = (await ann.request(v1.CreateTable())).table.id
    not_found = server.metrics.errors.labels(ErrorCode.NOT_FOUND)
    before = not_found._value.get()
    await ann.drop()
    await ann.wait_until(lambda: ann.reconnects == 1, 10)
    await ann.resync(kept)  # answered after any resync the reconnection started
    await asyncio.sleep(0.2)
    assert not_found._value.get() == before, "a table it had left was resynced"
    assert ann.left == {left}
