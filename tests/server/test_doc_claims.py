"""What docs/protocol.md says about the wire that the other tests do not already check."""

from __future__ import annotations

from pathlib import Path

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from blackdrez.protocol import v1
from blackdrez.protocol.codec import MAX_DEPTH, encode
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.app import Settings

DOC = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text(encoding="utf-8")


async def test_the_snapshot_after_joined_has_no_id_and_a_resync_snapshot_has_one(server, connect):
    ann = await connect(server, name="Ann", record=True)
    bob = await connect(server, name="Bob", record=True)
    requests = {
        ann: [v1.CreateTable(id=1), v1.StartSolitaire(id=2, game="blue_jacket")],
        bob: [v1.QuickJoin(id=3)],
    }
    for client, messages in requests.items():
        for message in messages:
            await client.send(message)
            await client.wait_until(lambda c=client, m=message: replies(c, m.id))
            joined, snapshot = replies(client, message.id, also_following=True)
            assert isinstance(joined, v1.Joined) and joined.id == message.id
            assert isinstance(snapshot, v1.Snapshot) and snapshot.id is None
    session = next(t for t in ann.tables if t.startswith("s"))
    bob_table = next(iter(bob.tables))
    cy = await connect(server, name="Cy", record=True)
    await cy.send(v1.Spectate(id=4, table=bob_table))
    await cy.wait_until(lambda: replies(cy, 4))
    assert [type(m) for m in replies(cy, 4, also_following=True)] == [v1.Joined, v1.Snapshot]
    assert replies(cy, 4, also_following=True)[1].id is None
    # a resync far behind the table's history answers with a snapshot carrying the request id
    reply = await ann.request(v1.Resync(table=session, since=0))
    assert isinstance(reply, v1.Update | v1.Snapshot) and reply.id is not None


def replies(client, request_id: int, also_following: bool = False) -> list:
    """The messages the client received with ``request_id`` (and the one right after each)."""
    from blackdrez.protocol.codec import SERVER_DECODERS

    received = [SERVER_DECODERS[1].decode(frame) for frame in client.frames]
    found = []
    for index, message in enumerate(received):
        if getattr(message, "id", None) == request_id:
            found.append(message)
            if also_following and index + 1 < len(received):
                found.append(received[index + 1])
    return found


@pytest.mark.parametrize("greeted", [False, True])
async def test_a_text_frame_that_is_not_utf8_closes_with_1007(server, greeted: bool) -> None:
    async with ws_connect(f"ws://127.0.0.1:{server.port}/") as ws:
        if greeted:
            await ws.send(encode(Hello(versions=[1]), False))
            await ws.recv()
        await ws.send(b'{"type": "ping", "name": "\xff"}', text=True)
        with pytest.raises(ConnectionClosed):
            while True:
                await ws.recv()
    assert ws.close_code == 1007


def test_the_doc_states_the_limits_the_code_has() -> None:
    defaults = Settings()
    assert f"nested deeper than {MAX_DEPTH} levels" in DOC
    assert f"{defaults.send_buffer:,} bytes" in DOC
    assert f"{defaults.token_lifetime / 86400:g} days" in DOC
    assert f"{defaults.max_solitaire_sessions} open solitaire sessions" in DOC
    assert f"{defaults.max_connections_per_ip} connections" in DOC
    assert f"may open {defaults.handshake_burst} WebSocket connections at once" in DOC
    assert f"then {defaults.handshake_rate:g} a second (operator settings)" in DOC
    assert f"within {defaults.close_timeout:g} seconds" in DOC


def test_every_error_code_and_close_code_has_a_row_in_the_doc() -> None:
    missing = [code.value for code in ErrorCode if f"| `{code.value}` |" not in DOC]
    missing += [int(code) for code in CloseCode if f"| {int(code)} |" not in DOC]
    assert not missing, f"add these to docs/protocol.md's tables: {missing}"
