"""The server's state a failed test reports (``blackdrez.server.testing.diagnose``)."""

from __future__ import annotations

from blackdrez.server.app import GameServer
from blackdrez.server.testing.diagnose import clock_offset, describe
from tests.server.conftest import ClientFactory
from tests.server.helpers import seat_and_start


async def test_a_stuck_table_is_described_as_stuck(
    server: GameServer, connect: ClientFactory
) -> None:
    """A held lock, its waiters, the timer, the players on turn and a stepped wall clock are
    what a timed-out wait needs to be told apart: each is said."""
    ann, bob = await connect(server, name="Ann"), await connect(server, name="Bob")
    table = await seat_and_start(ann, [bob], turn_seconds=600)
    offset = clock_offset()
    hosting = server.node.hosting
    free = describe(server, offset)
    assert f"table {table}: playing" in free
    assert "lock free" in free and "a timer in +" in free
    assert "the wall clock moved +0.0" in free
    assert "connection Ann" in free and "idle, 0 frames unwritten" in free
    async with hosting.lock(table):
        held = describe(server, offset - 30.0)
        assert "lock held, 0 waiting" in held
        assert "the wall clock moved +30.0" in held
