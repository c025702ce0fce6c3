"""Traces (issue 38): off unless the OTEL_* environment asks; when on, an action forwarded from
the node its player is connected to shows spans from both nodes in one trace (the request, its
forwarding, the host serving it, the log append), recorded by the SDK's in-memory exporter; the
JSON log lines written in a span carry its trace id."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from blackdrez.clients.bots import play_table
from blackdrez.protocol import v1
from blackdrez.server import tracing
from blackdrez.server.logs import JsonFormatter


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_traces_are_off_unless_the_environment_asks(environ: dict[str, str], on: bool) -> None:
    assert tracing.wanted(environ) is on


def test_off_a_span_is_one_shared_empty_block() -> None:
    assert tracing.tracer is None
    assert tracing.span("a", blackdrez_node="n") is tracing.span("b")
    assert tracing.traceparent() is None and tracing.current_ids() is None


def test_configured_from_the_environment_and_stopped() -> None:
    try:
        assert tracing.configure("n1", {"OTEL_TRACES_EXPORTER": "console"})
        assert tracing.tracer is not None
    finally:
        tracing.stop()
    assert tracing.tracer is None


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    try:
        yield exporter
    finally:
        tracing.stop()


def test_a_json_log_line_in_a_span_carries_its_trace(spans: InMemorySpanExporter) -> None:
    record = logging.LogRecord("blackdrez.node", logging.INFO, __file__, 1, "hello", None, None)
    formatter = JsonFormatter("n1")
    assert "trace_id" not in json.loads(formatter.format(record))
    with tracing.span("blackdrez.test"):
        line = json.loads(formatter.format(record))
    [span] = spans.get_finished_spans()
    assert span.context is not None
    assert line["trace_id"] == f"{span.context.trace_id:032x}"
    assert line["span_id"] == f"{span.context.span_id:016x}"


def node_of(span: ReadableSpan) -> object:
    return (span.attributes or {}).get("blackdrez.node")


async def test_a_forwarded_action_is_one_trace_across_both_nodes(
    spans: InMemorySpanExporter, make_server, connect, redis_url_clean
) -> None:
    one = await make_server(redis_url=redis_url_clean, node_id="n1")
    two = await make_server(redis_url=redis_url_clean, node_id="n2")
    ann, bob = await connect(one, name="Ann"), await connect(two, name="Bob")
    options = v1.TableOptions(seats=2, max_rounds=1, round_pause_seconds=0)
    table = (await ann.request(v1.CreateTable(options=options))).table.id
    await bob.request(v1.JoinTable(table=table))  # hosted at n1, asked at n2: forwarded
    for client in (ann, bob):
        await client.request(v1.SetReady(table=table))
    await ann.request(v1.StartGame(table=table))
    await asyncio.gather(play_table(ann, table), play_table(bob, table))
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished if s.context is not None}
    acts = [
        s
        for s in finished
        if s.name == "blackdrez.request"
        and node_of(s) == "n2"
        and (s.attributes or {}).get("blackdrez.message") in ("Act", "JoinTable")
    ]
    assert acts, sorted({s.name for s in finished})
    for request in acts:
        assert request.context is not None
        trace = [
            s for s in finished if s.context and s.context.trace_id == request.context.trace_id
        ]
        named = {(s.name, node_of(s)) for s in trace}
        assert {
            ("blackdrez.request", "n2"),
            ("blackdrez.forward", "n2"),
            ("blackdrez.serve_forward", "n1"),
            ("blackdrez.log_append", "n1"),
        } <= named, named
        served = next(s for s in trace if s.name == "blackdrez.serve_forward")
        assert served.parent is not None
        assert by_id[served.parent.span_id].name == "blackdrez.forward", "a child across nodes"
        appended = next(s for s in trace if s.name == "blackdrez.log_append")
        assert appended.parent is not None and appended.parent.span_id == served.context.span_id
        assert (appended.attributes or {}).get("blackdrez.table") == table
