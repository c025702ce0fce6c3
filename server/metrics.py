"""Prometheus metrics, one registry per server so tests can run several servers in a process.

Every metric is listed, with what to watch it for, in docs/operations.md ("Metrics"); the
monitoring profile's dashboard (deploy/grafana/) charts them.

The three a node touches for every action (messages in, frames out, the action latency) are
counted in plain Python numbers: the messages and frames folded into their Prometheus counters
when the metrics are read (:meth:`Metrics.render`), the latency kept as a histogram's bucket
counts that a collector of its own (:class:`Latencies`) exposes: a Prometheus counter takes a
lock and checks its argument (1-2 µs), a histogram's observation more (a lock and a walk over
its buckets), on every action.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import math
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

INVALID_MESSAGE = "invalid"
"""``blackdrez_messages_in_total``'s ``type`` for a frame that is no known message (undecodable,
an unknown or missing type, a bad field): one label value, never the type a client made up, so
that a client cannot add label values (each is a time series kept for good)."""

ACTION_BUCKETS = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5)
"""``blackdrez_action_seconds``'s buckets (their upper bounds, seconds; ``+Inf`` after them)."""


class Latencies:
    """A histogram (``blackdrez_action_seconds``) whose counts are plain numbers, exposed by
    its own :meth:`collect` as Prometheus's Histogram exposes its own (``_bucket``, ``_count``,
    ``_sum``): an observation is a bisection and two additions, where a Histogram's takes a
    lock and walks its buckets (every action: :meth:`Metrics.observe_action` counts here)."""

    def __init__(self, name: str, documentation: str, bounds: Sequence[float]) -> None:
        self.name = name
        self.documentation = documentation
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        """Observations in each bucket: at most its bound and above the one before (the
        last: above every bound)."""
        self.sum = 0.0

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=[])
        bounds = [floatToGoString(bound) for bound in (*self.bounds, math.inf)]
        cumulative = list(itertools.accumulate(self.counts))
        family.add_metric([], list(zip(bounds, cumulative, strict=True)), self.sum)
        yield family


RATE_LIMITED_KINDS = ("handshake", "api")
"""``blackdrez_rate_limited_total``'s ``kind``: what a client address sent too fast."""


class Metrics:
    """The server's counters, gauges and histograms."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.connections = Gauge("blackdrez_connections", "Open WebSocket connections", registry=r)
        self.tables = Gauge("blackdrez_tables", "Tables hosted by this node", ["game"], registry=r)
        self.messages_in = Counter(
            "blackdrez_messages_in", "Messages received", ["type"], registry=r
        )
        self._message_counters: dict[str, Counter] = {}
        self._messages_in: collections.Counter[str] = collections.Counter()
        self._messages_out = 0
        self.messages_out = Counter("blackdrez_messages_out", "Frames sent", registry=r)
        self.tables_stopped = Counter(
            "blackdrez_tables_stopped",
            "Tables stopped for changing faster than any game can (a bug: see the error log)",
            registry=r,
        )
        self.errors = Counter("blackdrez_errors", "Error replies by code", ["code"], registry=r)
        self.closes = Counter(
            "blackdrez_closes", "Connections closed by the server", ["code"], registry=r
        )
        self.rate_limited = Counter(
            "blackdrez_rate_limited",
            "HTTP requests refused with 429 for coming too fast from one client address, by kind: "
            "handshake (a new WebSocket connection) or api (the records API)",
            ["kind"],
            registry=r,
        )
        for kind in RATE_LIMITED_KINDS:
            self.rate_limited.labels(kind)  # shown at 0 from the start
        self.records_written = Counter(
            "blackdrez_records_written",
            "Finished games this node stored in the records database",
            registry=r,
        )
        self.records_failures = Counter(
            "blackdrez_records_write_failures",
            "Failed writes of finished games (each is retried)",
            registry=r,
        )
        self.records_pending = Gauge(
            "blackdrez_records_pending",
            "Finished games waiting to be stored (should stay near 0)",
            registry=r,
        )
        self.records_catching_up = Gauge(
            "blackdrez_records_catching_up",
            "1 while the records writer is behind and its threads get the GIL sooner",
            registry=r,
        )
        self.action_latency = Latencies(
            "blackdrez_action_seconds",
            "Time from receiving an action to handing its update to the connections",
            ACTION_BUCKETS,
        )
        r.register(self.action_latency)

        self.loop_lag = Histogram(
            "blackdrez_loop_lag_seconds",
            "How late the node's event loop woke for a timer due every 50 ms: what a frame that"
            " arrives at a random moment waits before the node reads it",
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0),
            registry=r,
        )
        self.store_rtt = Histogram(
            "blackdrez_store_rtt_seconds",
            "Round trip of the node's heartbeat to the store (Redis)",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=r,
        )
        self.store_up = Gauge(
            "blackdrez_store_up",
            "1 while the store answers, 0 while it cannot be reached",
            registry=r,
        )
        self.tables_adopted = Counter(
            "blackdrez_tables_adopted",
            "Tables this node took over from their log (a node died or handed them over)",
            registry=r,
        )
        self.restarts = Counter(
            "blackdrez_background_restarts",
            "The node's background loops (heartbeat, orphan scan, lease renewal...) started"
            " again after failing unexpectedly (each failure is logged with its traceback)",
            ["loop"],
            registry=r,
        )
        self.tables_handed_over = Counter(
            "blackdrez_tables_handed_over",
            "Tables this node gave up to the others when it stopped (drain or SIGTERM)",
            registry=r,
        )

    def count_message(self, kind: str) -> None:
        """Count a received message of type ``kind`` (its wire type, or
        :data:`INVALID_MESSAGE`) in ``messages_in`` (folded in when read: see the module
        docstring)."""
        self._messages_in[kind] += 1

    def count_out(self, frames: int) -> None:
        """Count frames sent, in ``messages_out`` (folded in when read)."""
        self._messages_out += frames

    def observe_action(self, seconds: float) -> None:
        """An action's time on its node, in ``action_latency`` (a bisection and two additions,
        inline: every action)."""
        latencies = self.action_latency
        latencies.counts[bisect.bisect_left(latencies.bounds, seconds)] += 1
        latencies.sum += seconds

    def fold(self) -> None:
        """Add what the hot path counted to the Prometheus metrics."""
        for kind, count in self._messages_in.items():
            counter = self._message_counters.get(kind)
            if counter is None:
                counter = self._message_counters[kind] = self.messages_in.labels(kind)
            counter.inc(count)
        self._messages_in.clear()
        if self._messages_out:
            self.messages_out.inc(self._messages_out)
            self._messages_out = 0

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        self.fold()
        return generate_latest(self.registry)
