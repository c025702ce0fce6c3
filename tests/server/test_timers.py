"""A room's deadlines (``Timers.next``) against the plain definition: the earliest of every
deadline that applies."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from blackdrez.server.table.lifecycle import TableStatus
from blackdrez.server.table.seating import Seat
from blackdrez.server.table.timers import Timers

times = st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False)


def seat(away_since: float | None) -> Seat:
    occupant = Seat(player="p", name="P")
    occupant.away_since = away_since
    return occupant


@given(
    turn=times,
    round_at=times,
    waiting=times,
    close=times,
    status=st.sampled_from(list(TableStatus)),
    aways=st.lists(st.none() | st.builds(seat, times), max_size=8),
    grace=st.floats(min_value=0, max_value=600),
)
def test_the_next_deadline_is_the_earliest_that_applies(
    turn: float | None,
    round_at: float | None,
    waiting: float | None,
    close: float | None,
    status: TableStatus,
    aways: list[Seat | None],
    grace: float,
) -> None:
    timers = Timers(turn_seconds=30.0, close_at=0.0)
    timers.turn_deadline, timers.next_round_at, timers.waiting_until = turn, round_at, waiting
    timers.close_at = close
    expected = [t for t in (turn, round_at, waiting) if t is not None]
    if close is not None and status in (TableStatus.OPEN, TableStatus.FINISHED):
        expected.append(close)
    expected += [s.away_since + grace for s in aways if s is not None and s.away_since is not None]
    assert timers.next(status, aways, grace) == (min(expected) if expected else None)
