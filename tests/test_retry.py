"""The one backoff policy (blackdrez.protocol.retry): capped, jittered, and at once after a node's
death."""

from __future__ import annotations

import itertools

from blackdrez.protocol.retry import (
    RECONNECT,
    RECONNECT_SPREAD,
    RETRY,
    Backoff,
    reconnect_delays,
)


def test_delays_double_up_to_their_cap_and_are_jittered() -> None:
    delays = list(itertools.islice(Backoff(first=0.1, cap=0.8).delays(), 200))
    assert 0.05 <= delays[0] <= 0.1
    assert all(d <= 0.8 for d in delays), "never above the cap"
    assert all(d >= 0.4 for d in delays[3:]), "the plan doubles up to the cap"
    assert len(set(delays[3:])) > 150, "jittered: no two waiters retry in step"


def test_a_refused_request_is_retried_within_a_quarter_second() -> None:
    delays = list(itertools.islice(RETRY.delays(), 100))
    assert max(delays) <= 0.25
    assert min(delays) >= 0.025, "never a tight loop"


def test_a_connection_whose_node_died_is_reopened_at_once_then_with_backoff() -> None:
    for lost in (1006, None):  # no close frame: the node died
        delays = list(itertools.islice(reconnect_delays(lost), 12))
        assert delays[0] <= RECONNECT_SPREAD
        assert RECONNECT.first / 2 <= delays[1] <= RECONNECT.first
        assert max(delays) <= RECONNECT.cap
    firsts = {next(reconnect_delays(1006)) for _ in range(50)}
    assert len(firsts) > 40, "the first tries of a dead node's clients are spread out"


def test_any_other_close_waits_before_reconnecting() -> None:
    for code in (1000, 1001, 1008, 4003):  # normal, shutting down, rate limit, slow consumer
        delays = list(itertools.islice(reconnect_delays(code), 12))
        assert RECONNECT.first / 2 <= delays[0] <= RECONNECT.first
        assert max(delays) <= RECONNECT.cap
