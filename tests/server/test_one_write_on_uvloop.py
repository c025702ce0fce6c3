"""An action's reply and its update reach the player in one write, on the node's real event loop
(uvloop), however busy the loop is.

A connection's frames are written together once the loop's turn ends
(``blackdrez.server.connection.Outbox``). On Redis an action's update goes out from the callback
that read the log's reply and the player's ``ok`` from the request, resumed a pass of the loop
later. uvloop reads sockets before it runs the callbacks already due, so when any frame was sent
in the pass before (on a busy node: always), the turn's writes were due before the request
resumed: the update went in them and the ``ok`` in a write of its own, one more system call per
action (the load tool measured about one more write an action on Redis than in memory). Here a
watcher is sent a frame every pass while four players act, and every reply must go with its
update, on every store; and a hold keeps back its own player's frames only.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest
import uvloop
from websockets.protocol import State

from blackdrez.clients.client import Client
from blackdrez.games.blackdrez import bots as blackdrez_bots
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.protocol import v1
from blackdrez.server.app import GameServer, Settings
from blackdrez.server.connection import Connection, Outbox
from tests.server.helpers import game_over, seat_and_start
from tests.test_group_commit import viewer

ACTIONS = 24


@pytest.mark.parametrize("store", ["memory", "redis", "cluster"])
def test_a_players_reply_and_its_update_go_in_one_write_while_the_loop_is_busy(
    store: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixture = {"redis": "redis_url_clean", "cluster": "redis_cluster_url_clean"}.get(store)
    redis_url = request.getfixturevalue(fixture) if fixture else None
    watcher_id = ""
    writes: list[list[bytes]] = []
    """The frames of each write to the players' connections while they act."""
    counting = False
    flush = Connection.flush

    def counted(self: Connection) -> None:
        playing = counting and self.player != watcher_id
        if playing and self._out and self.ws.protocol.state is State.OPEN:
            writes.append(list(self._out))
        flush(self)

    monkeypatch.setattr(Connection, "flush", counted)

    async def main() -> None:
        server = GameServer(
            Settings(
                port=0,
                redis_url=redis_url,
                messages_per_second=1000.0,
                burst=1000,
                ping_interval=None,
            )
        )
        await server.start()
        url = f"ws://127.0.0.1:{server.port}/"
        names = ("Ann", "Bob", "Cat", "Dan", "Eve")
        clients = [await Client.connect(url, name=name) for name in names]
        busy = True

        async def chatter(connection: Connection) -> None:
            while busy:  # a frame every pass: the turn's writes are always due
                connection.send(v1.LobbyUpdate(tables=[]))
                await asyncio.sleep(0)

        try:
            players, watcher = clients[:4], clients[4]
            table = await seat_and_start(players[0], players[1:])
            noise = asyncio.create_task(chatter(server.node.clients[watcher.player]))
            nonlocal counting, watcher_id
            watcher_id = watcher.player
            acted = 0
            while acted < ACTIONS:
                if game_over(players[0], table):  # the next game
                    for player in players:
                        await player.request(v1.SetReady(table=table))
                    await players[0].request(v1.StartGame(table=table))
                    await players[0].wait_until(lambda: not game_over(players[0], table))
                mover = next((p for p in players if p.tables[table].legal), None)
                if mover is None:
                    await asyncio.sleep(0.02)
                    continue
                state = mover.tables[table]
                view = msgspec.convert(state.view, blackdrez.View)
                legal = [msgspec.convert(action, blackdrez.Action) for action in state.legal]
                counting = True
                await mover.act(table, blackdrez_bots.threshold(view, legal))
                counting = False
                acted += 1
            busy = False
            await noise
        finally:
            busy = False
            for client in clients:
                await client.close()
            await server.stop()

    uvloop.run(main())
    replies = [write for write in writes if any(b'"type":"ok"' in frame for frame in write)]
    assert len(replies) == ACTIONS
    alone = [write for write in replies if not any(b'"type":"update"' in f for f in write)]
    assert not alone, f"{len(alone)} of {ACTIONS} replies went without their update"


async def test_a_hold_keeps_back_its_players_frames_only() -> None:
    """Held for a player while the turn's writes are due: everyone else's frames go in those
    writes (no update waits longer for someone else's reply); the player's wait for the
    callbacks due by then (their request's resumption) and go with what it sends."""
    outbox = Outbox()
    frames: dict[str, list[str | bytes]] = {"ann": [], "bob": []}
    ann, bob = (viewer(outbox, frames[name], player=name) for name in ("ann", "bob"))
    ann.send_frame("earlier")  # the turn's writes are due
    order: list[str] = []

    def settled() -> None:  # the log's reply read: the update to both, Ann's request woken
        outbox.hold("ann")
        asyncio.get_running_loop().call_soon(resumed)
        ann.send_frame("update")
        bob.send_frame("update")

    def resumed() -> None:
        order.append(f"resumed with bob's {len(frames['bob'])} frames written")
        ann.send_frame("ok")

    settled()
    for _ in range(3):
        await asyncio.sleep(0)
    assert order == ["resumed with bob's 1 frames written"]
    assert frames["bob"] == ["update"]
    assert frames["ann"] == ["earlier", "update", "ok"]
    assert ann.ws.transport.writes == 1  # type: ignore[attr-defined]
