"""The node reads the time from its clock (``blackdrez.server.node.clock``), so a test turns it:
the wall clock for what the players see (a pong's time, a daily deal's day: ``test_daily``), the
monotonic clock for how long a lease can be trusted without renewing it."""

from __future__ import annotations

import time

from blackdrez.protocol import v1
from blackdrez.server.node.clock import SystemClock


def test_the_system_clock_reads_the_process_clocks() -> None:
    clock = SystemClock()
    before_wall, before_monotonic = time.time(), time.monotonic()
    wall, monotonic = clock.time(), clock.monotonic()
    assert before_wall <= wall <= time.time()
    assert before_monotonic <= monotonic <= time.monotonic()


async def test_a_pong_gives_the_time_of_the_nodes_clock(server, connect, monkeypatch) -> None:
    client = await connect(server, name="Timer")
    monkeypatch.setattr(server.node.clock, "time", lambda: 1_800_000_000.0)
    pong = await client.request(v1.Ping())
    assert isinstance(pong, v1.Pong) and pong.time == 1_800_000_000.0


async def test_a_lease_past_its_validity_on_the_nodes_clock_is_renewed_first(
    server, connect, monkeypatch
) -> None:
    """Turned past a lease's validity, the node renews it (fenced) before it serves the table
    again, and trusts it from the turned time on: the validity is the clock's, not the
    process's."""
    host = await connect(server, name="Host")
    table = (await host.request(v1.CreateTable())).table.id
    lease = server.node.hosting.leases.held[table]
    later = time.monotonic() + 3600.0
    assert lease.valid_until < later
    renewed: list[dict[str, int]] = []
    renew = server.node.store.leases.renew

    async def noted(held: dict[str, int], ttl: float) -> set[str]:
        renewed.append(dict(held))
        return await renew(held, ttl)

    monkeypatch.setattr(server.node.store.leases, "renew", noted)
    monkeypatch.setattr(server.node.clock, "monotonic", lambda: later)
    await host.request(v1.Resync(table=table, since=0))
    assert {table: lease.token} in renewed
    assert server.node.hosting.leases.held[table] is lease and lease.valid_until > later
    assert table in server.node.rooms
