"""Viewers of a table hosted on another node, when the bus delivers things in an awkward order.

Node B forwards a viewer's ``spectate``, ``join`` or ``resync`` to the table's host A and relays
the answer; it follows the table's updates on the table's channel. A's answer travels on B's node
channel, the updates on the table's: an update logged right after the answer can reach B first,
and B may subscribe again while updates are published. Whatever the order, a viewer ends up
holding the latest event, in order, with nothing missed and nothing taken back (a client taken
back to an older state stalls, waiting for a turn it already has, or counts the later events
twice: the "UNFAIR GAME" its fairness check then reports).

The awkward orders are made, not waited for: A's answer to B (or B's subscription) is held until
an action on A has been logged and announced.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from blackdrez.clients.bots import check_fairness
from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server import bus
from blackdrez.server.app import GameServer
from blackdrez.server.stores.base import Append, Settled, node_channel, table_channel
from blackdrez.server.table import history
from tests.server.helpers import play_out, seat_and_start

WAIT = 15.0


class Held:
    """Holds the next call that ``matches``, until released."""

    def __init__(self, matches: Callable[..., bool], *, skip: int = 0) -> None:
        self.matches = matches
        self.skip = skip
        """How many matching calls go through before the one held."""
        self.armed = False
        self.holding = asyncio.Event()
        self.released = asyncio.Event()

    def wrap(self, call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def held(*args: Any) -> Any:
            if self.armed and self.matches(*args) and self._skipped():
                self.armed = False
                self.holding.set()
                await self.released.wait()
            return await call(*args)

        return held

    def _skipped(self) -> bool:
        self.skip -= 1
        return self.skip < 0


def reply_to(node: str) -> Callable[[str, bytes], bool]:
    """Matches a publication of an answer to a request that ``node`` forwarded."""
    return lambda channel, data: (
        channel == node_channel(node) and isinstance(bus.decode(data), bus.Reply)
    )


@pytest.fixture
async def nodes(make_server, redis_url_clean) -> tuple[GameServer, GameServer]:
    host = await make_server(redis_url=redis_url_clean, node_id="node-a")
    follower = await make_server(redis_url=redis_url_clean, node_id="node-b")
    return host, follower


async def a_game_across(
    nodes: tuple[GameServer, GameServer], connect: Any
) -> tuple[Client, Client, Client, str, Client]:
    """A game hosted on A by Host and Other, with Remote playing from B (so B follows the
    table from then on), played until Host or Other is on turn: the three players, the table,
    and the one on turn."""
    a, b = nodes
    host, other = await connect(a, name="Host"), await connect(a, name="Other")
    remote = await connect(b, name="Remote")
    table = await seat_and_start(host, [other, remote], turn_seconds=60)
    return host, other, remote, table, await a_move_on([host, other], table, remote)


async def a_move_on(players: list[Client], table: str, remote: Client) -> Client:
    """Play (with ``remote``, whose node does not host the table) until one of ``players`` is
    on turn; return that player."""
    for _ in range(50):
        await asyncio.sleep(0.05)
        on_turn = [p for p in [*players, remote] if p.tables[table].legal]
        if not on_turn:
            continue
        if on_turn[0] is not remote:
            return on_turn[0]
        seq = remote.tables[table].seq
        await remote.act(table, remote.tables[table].legal[0])
        await remote.wait_until(lambda s=seq: remote.tables[table].seq > s, WAIT)
    raise AssertionError("nobody on the host's node came on turn")


async def act_while_held(mover: Client, table: str, held: Held) -> int:
    """Once ``held`` holds its call, play a move with ``mover``; release; return its event."""
    await asyncio.wait_for(held.holding.wait(), WAIT)
    ok = await mover.act(table, mover.tables[table].legal[0])
    await asyncio.sleep(0.3)  # the update reaches the other node before the held call goes on
    held.released.set()
    return ok.seq


async def test_a_remote_spectator_answered_after_a_later_update_holds_it(
    nodes, connect, monkeypatch
) -> None:
    """The update logged after the spectator's snapshot reaches B before the answer: the
    spectator gets the snapshot, then that update (not the update first, dropped for want of
    a table, and then nothing: it would wait for the next update to see the move)."""
    a, b = nodes
    host, other, remote, table, mover = await a_game_across(nodes, connect)
    held = Held(reply_to("node-b"))
    monkeypatch.setattr(a.node.store.bus, "publish", held.wrap(a.node.store.bus.publish))
    spectator = await connect(b, name="Spectator")
    held.armed = True
    spectating = asyncio.create_task(spectator.request(v1.Spectate(table=table)))
    seq = await act_while_held(mover, table, held)
    await spectating
    state = spectator.tables[table]
    await spectator.wait_until(lambda: state.seq >= seq, WAIT)
    assert state.view == other.tables[table].view or state.view["to_act"] is not None
    await asyncio.gather(*(play_out(p, table) for p in (host, other, remote)))
    await spectator.wait_until(lambda: state.view["phase"] == "over", WAIT)
    seqs = [e.seq for e in state.events]
    assert seqs == sorted(set(seqs)), "no duplicate, in order"


@pytest.mark.parametrize("answer", ["update", "snapshot"])
async def test_a_remote_resync_answered_after_a_later_update_never_takes_a_player_back(
    answer, nodes, connect, monkeypatch
) -> None:
    """A player on B resyncs; the next move, logged right after, reaches B (and the player)
    before the answer: the older answer (the events since, or a snapshot when they are no longer
    kept) must not take the player back to the event before it (its view and legal moves stale:
    it would wait for a turn it already has), nor make it count the move twice (its fairness
    proof would fail)."""
    if answer == "snapshot":
        monkeypatch.setattr(history, "KEPT_EVENTS", 4)  # a resync from 0 gets a snapshot
    a = nodes[0]
    host, other, remote, table, mover = await a_game_across(nodes, connect)
    state = remote.tables[table]
    held = Held(reply_to("node-b"))
    monkeypatch.setattr(a.node.store.bus, "publish", held.wrap(a.node.store.bus.publish))
    held.armed = True
    since = state.seq if answer == "update" else 0
    resyncing = asyncio.create_task(remote.request(v1.Resync(table=table, since=since)))
    seq = await act_while_held(mover, table, held)
    await remote.wait_until(lambda: state.seq >= seq, WAIT)
    latest = (state.seq, state.view, state.legal)
    reply = await resyncing
    assert isinstance(reply, v1.Update if answer == "update" else v1.Snapshot)
    await asyncio.sleep(0.2)  # anything B sends after the answer
    assert (state.seq, state.view, state.legal) == latest, "taken back by an older answer"
    await asyncio.gather(*(play_out(p, table) for p in (host, other, remote)))
    seqs = [e.seq for e in state.events]
    assert seqs == sorted(set(seqs)), "no duplicate, in order"
    assert check_fairness(state) is None


async def test_a_lone_remote_viewer_misses_no_update_while_its_node_subscribes(
    nodes, connect, monkeypatch
) -> None:
    """The only viewer on B of a table hosted on A resyncs (as after a reconnection): B follows
    the table for the request, and must go on following it for the viewer, not drop the
    subscription and make it again (an update published in between would be lost to the
    viewer until the next one)."""
    b = nodes[1]
    _host, _other, remote, table, mover = await a_game_across(nodes, connect)
    back = await Client.connect(f"ws://127.0.0.1:{b.port}/", token=remote.token)  # replaces it
    await remote.closed
    await until(lambda: table not in b.node.fanout.watchers)  # nobody on B watches the table
    state = back.tables.setdefault(table, remote.tables[table])
    # B's subscription after the one for the request (if any) is held while the move is made
    subscribed = Held(lambda channel, handler: channel == table_channel(table), skip=1)
    monkeypatch.setattr(b.node.store.bus, "subscribe", subscribed.wrap(b.node.store.bus.subscribe))
    subscribed.armed = True
    resyncing = asyncio.create_task(back.resync(table))
    holding = asyncio.create_task(subscribed.holding.wait())
    await asyncio.wait([resyncing, holding], timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
    holding.cancel()
    try:
        ok = await mover.act(table, mover.tables[table].legal[0])
        await asyncio.sleep(0.3)  # announced, while B subscribes again (if it does)
        subscribed.released.set()
        await resyncing
        await back.wait_until(lambda: state.seq >= ok.seq, WAIT)
    finally:
        await back.close()


async def until(predicate: Callable[[], object]) -> None:
    async with asyncio.timeout(WAIT):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_an_update_without_events_after_lost_ones_makes_the_viewer_resync(
    nodes, connect, monkeypatch
) -> None:
    """The bus loses a table's update on its way to B (pub/sub keeps nothing while a node's
    subscription is down: a Redis restart), and the next one B gets has no events (a spectator
    came: only the table's info changed). Its number is past what the viewer on B holds: the
    viewer must resync, not take that number as held (it would never ask for the lost events,
    and its fairness proof would miss their cards: the "UNFAIR GAME" of the Redis restart)."""
    a = nodes[0]
    host, other, remote, table, mover = await a_game_across(nodes, connect)
    state = remote.tables[table]
    held_seq = state.seq
    append, append_soon = a.node.store.logs.append, a.node.store.logs.append_soon

    def without_announcement(entry: Append) -> Append:  # logged, lost on the bus
        return Append(entry.table_id, entry.token, entry.position, entry.entry)

    async def unannounced(entry: Append) -> bool:
        return await append(without_announcement(entry))

    def unannounced_soon(entry: Append, settled: Settled) -> None:  # (an action's append)
        append_soon(without_announcement(entry), settled)

    monkeypatch.setattr(a.node.store.logs, "append", unannounced)
    monkeypatch.setattr(a.node.store.logs, "append_soon", unannounced_soon)
    lost = await mover.act(table, mover.tables[table].legal[0])
    monkeypatch.setattr(a.node.store.logs, "append", append)
    monkeypatch.setattr(a.node.store.logs, "append_soon", append_soon)
    await (await connect(a, name="Onlooker")).request(v1.Spectate(table=table))
    await remote.wait_until(lambda: state.seq >= lost.seq, WAIT)
    seqs = [e.seq for e in state.events]
    assert seqs[-1] == state.seq > held_seq, "the lost events were fetched, not skipped"
    await asyncio.gather(*(play_out(p, table) for p in (host, other, remote)))
    seqs = [e.seq for e in state.events]
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), "no gap, no duplicate"
    assert check_fairness(state) is None


async def test_a_node_stops_following_a_table_once_it_closed(nodes, connect) -> None:
    """A spectator on B of a table hosted on A; the table closes. B used to stay subscribed to
    the table's channel, and keep the watch, for as long as the spectator stayed connected (its
    ``leave`` answered ``not_found``, unwatching nothing)."""
    a, b = nodes
    host = await connect(a, name="Host")
    table = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=2)))).table.id
    watcher = await connect(b, name="Watcher")
    await watcher.request(v1.Spectate(table=table))
    assert table in b.node.fanout.remote_tables
    await host.request(v1.LeaveTable(table=table))  # nobody seated: the table closes
    state = watcher.tables[table]
    await watcher.wait_until(
        lambda: any(e.event["type"] == "table_closed" for e in state.events), WAIT
    )
    await until(lambda: table not in b.node.fanout.remote_tables)
    assert table not in b.node.fanout.watchers
    assert table not in b.node.clients[watcher.player].tables
    channel = table_channel(table)
    assert await b.node.store.link.redis.pubsub_numsub(channel) == [(channel.encode(), 0)]
