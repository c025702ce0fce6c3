"""A node takes snapshots as its table's log grows, and the node that takes the table over starts
from the latest one, reading only the log after it: the game goes on with no gap, the same as the
other players saw it, and the table's game record still holds its whole log."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import blackdrez.server.node.failover
import blackdrez.server.node.hosting
from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.table.commands import rebuild as rebuild_from_log
from blackdrez.server.table.records import decode_table_record, record_log
from blackdrez.server.table.snapshots import resume_games
from tests.server.helpers import play_out, seat_and_start

EVERY = 5
"""Snapshot every 5 entries here, so that a short game has several."""


async def test_an_adopted_table_resumes_from_its_latest_snapshot(
    make_server: Any, redis_url_clean: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blackdrez.server.node.hosting, "SNAPSHOT_EVERY", EVERY)
    resumed: list[tuple[int, int]] = []

    def resume_noting(snapshot: tuple[int, bytes], tail: list[bytes]) -> Any:
        resumed.append((snapshot[0], len(tail)))
        return resume_games(snapshot, tail)

    monkeypatch.setattr(blackdrez.server.node.failover, "resume_games", resume_noting)
    first = await make_server(redis_url=redis_url_clean, node_id="leaving")
    second = await make_server(redis_url=redis_url_clean, node_id="staying")
    urls = [f"ws://127.0.0.1:{s.port}/" for s in (first, second)]
    a = await Client.connect(urls[0], name="A", reconnect=True, also=tuple(urls))
    b = await Client.connect(urls[1], name="B", reconnect=True, also=tuple(urls))
    try:
        table = await seat_and_start(a, [b], turn_seconds=60)
        assert table in first.node.rooms
        for _ in range(50):
            if (await first.store.logs.read_snapshot(table)) is not None:
                break
            await asyncio.sleep(0.05)
        stored = await first.store.logs.read_snapshot(table)
        assert stored is not None and stored[0] % EVERY == 0
        seq = a.tables[table].seq
        await first.stop()
        await b.wait_until(lambda: table in second.node.rooms, timeout=10)
        position, tail = resumed[-1]
        assert position >= stored[0], "the adopter started from the snapshot"
        assert tail <= EVERY, "and read and replayed only the entries from it on"
        await a.wait_until(lambda: a.reconnects == 1, timeout=10)
        await asyncio.gather(play_out(a, table), play_out(b, table))
        assert a.tables[table].view == b.tables[table].view
        assert a.tables[table].view["phase"] == "over"
        seqs = [e.seq for e in a.tables[table].events if e.seq > seq]
        assert seqs == list(range(seq + 1, seqs[-1] + 1)), "no gap across the handover"
        for player in (a, b):
            await player.request(v1.LeaveTable(table=table))
        for _ in range(100):
            record = await second.store.logs.game_record(table)
            if record is not None:
                break
            await asyncio.sleep(0.05)
        assert record is not None, "the deserted table was retired"
        log = record_log(decode_table_record(record))
        assert len(log) > position, "its record holds the whole log, read again at retirement"
        assert rebuild_from_log(log).status == "closed"
    finally:
        await a.close()
        await b.close()


async def test_a_snapshot_that_fails_costs_the_command_nothing(
    make_server: Any,
    connect: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(blackdrez.server.node.hosting, "SNAPSHOT_EVERY", 1)

    def unpicklable(room: Any) -> bytes:
        raise TypeError("cannot pickle this room")

    monkeypatch.setattr(blackdrez.server.node.hosting, "take_snapshot", unpicklable)
    node = await make_server()
    a, b = [await connect(node, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=60)
    await asyncio.gather(play_out(a, table), play_out(b, table))
    assert a.tables[table].view["phase"] == "over", "every command went through"
    assert await node.store.logs.read_snapshot(table) is None
    assert any("no snapshot of" in record.message for record in caplog.records)
