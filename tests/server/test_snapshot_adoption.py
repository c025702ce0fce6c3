"""A node takes snapshots as its table's log grows, and the node that takes the table over starts
from the latest one: the game goes on with no gap, and the same as the other players saw it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import server.node
from clients.client import Client
from server.snapshots import rebuild
from tests.server.helpers import play_out, seat_and_start

EVERY = 5
"""Snapshot every 5 entries here, so that a short game has several."""


async def test_an_adopted_table_resumes_from_its_latest_snapshot(
    make_server: Any, redis_url_clean: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server.node, "SNAPSHOT_EVERY", EVERY)
    used: list[tuple[int, int]] = []

    def rebuild_noting(entries: list[bytes], snapshot: tuple[int, bytes] | None = None) -> Any:
        if snapshot is not None:
            used.append((snapshot[0], len(entries)))
        return rebuild(entries, snapshot)

    monkeypatch.setattr(server.node, "rebuild", rebuild_noting)
    first = await make_server(redis_url=redis_url_clean, node_id="leaving")
    second = await make_server(redis_url=redis_url_clean, node_id="staying")
    urls = [f"ws://127.0.0.1:{s.port}/" for s in (first, second)]
    a = await Client.connect(urls[0], name="A", reconnect=True, also=tuple(urls))
    b = await Client.connect(urls[1], name="B", reconnect=True, also=tuple(urls))
    try:
        table = await seat_and_start(a, [b], turn_seconds=60)
        assert table in first.node.rooms
        for _ in range(50):
            if (await first.store.read_snapshot(table)) is not None:
                break
            await asyncio.sleep(0.05)
        stored = await first.store.read_snapshot(table)
        assert stored is not None and stored[0] % EVERY == 0
        seq = a.tables[table].seq
        await first.stop()
        await b.wait_until(lambda: table in second.node.rooms, timeout=10)
        assert used and used[-1][0] >= stored[0], "the adopter started from the snapshot"
        assert used[-1][1] - used[-1][0] < EVERY, "and replayed only the entries after it"
        await a.wait_until(lambda: a.reconnects == 1, timeout=10)
        await asyncio.gather(play_out(a, table), play_out(b, table))
        assert a.tables[table].view == b.tables[table].view
        assert a.tables[table].view["phase"] == "over"
        seqs = [e.seq for e in a.tables[table].events if e.seq > seq]
        assert seqs == list(range(seq + 1, seqs[-1] + 1)), "no gap across the handover"
    finally:
        await a.close()
        await b.close()
