"""What a player is written after an action: its update and the reply to its ``act`` in one
write (a write is most of a frame's cost: a system call that runs the loopback's receive path
too), on every store: on Redis the update goes out from the callback that read the log's
reply, and the reply to the ``act`` from its request a turn later, before the turn's frames are
written (``blackdrez.server.connection``, ``redis_tables._settle``)."""

from __future__ import annotations

import asyncio
import collections

import pytest

from blackdrez.server.connection import Connection
from tests.server.helpers import seat_and_start


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_an_action_s_update_and_reply_go_to_the_actor_in_one_write(
    make_server, connect, store: str, request: pytest.FixtureRequest, monkeypatch
) -> None:
    if store == "redis":
        server = await make_server(redis_url=request.getfixturevalue("redis_url_clean"))
    else:
        server = await make_server()
    a, b = [await connect(server, name=name) for name in ("A", "B")]
    table = await seat_and_start(a, [b])
    await asyncio.sleep(0.1)  # (the start's own frames written)
    writes: collections.defaultdict[str, list[bytes]] = collections.defaultdict(list)
    flush = Connection.flush

    def recording(connection: Connection) -> None:
        if connection._out:
            writes[connection.player].append(b"".join(connection._out))
        flush(connection)

    monkeypatch.setattr(Connection, "flush", recording)
    for _ in range(4):  # a few actions, each by the seat on turn
        state = a.tables[table]
        if state.view.get("to_act") is None:
            break
        on_turn = a if state.view["to_act"] == state.seat else b
        writes.clear()
        reply = await on_turn.act(table, {"type": "hit"})
        await asyncio.sleep(0.05)
        (with_reply,) = [data for data in writes[on_turn.player] if b'"type":"ok"' in data]
        assert b'"type":"update"' in with_reply, f"{store}: the reply written apart"
        assert b'"seq":%d,"events"' % reply.seq in with_reply  # the action's own update
