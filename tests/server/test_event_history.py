"""A room's kept events (``EventLog``): numbered by their place, read back for ``resync``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from blackdrez.protocol import v1
from blackdrez.server.table.history import KEPT_EVENTS, EventLog


def _log(count: int) -> EventLog:
    log = EventLog()
    for n in range(count):
        log.emit(v1.ReadyChanged(seat=n % 8, ready=bool(n % 2)))
    return log


@given(count=st.integers(0, KEPT_EVENTS * 2 + 3), since=st.integers(-2, KEPT_EVENTS * 2 + 5))
def test_since_gives_every_event_after_it_in_order_or_none_when_no_longer_kept(
    count: int, since: int
) -> None:
    log = _log(count)
    got = log.since(since)
    if since >= count:
        assert got == []
    elif since < 0 or since < count - KEPT_EVENTS:
        assert got is None
    else:
        assert got is not None
        assert [n.seq for n in got] == list(range(since + 1, count + 1))
        assert [n.event["seat"] for n in got] == [
            (seq - 1) % 8 for seq in range(since + 1, count + 1)
        ]
