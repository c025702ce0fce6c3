"""Traces (OpenTelemetry): one action followed from the node a player is connected to, through
its forwarding, to the node hosting the table and its log append. Off unless configured.

Theory of operation
-------------------
**Off by default, at no cost.** :data:`tracer` is ``None`` unless the standard ``OTEL_*``
environment asks for traces (:func:`wanted`: ``OTEL_TRACES_EXPORTER`` other than ``none``, or an
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``OTEL_SDK_DISABLED=true``
turns it off). Then :func:`span` hands back one shared empty context manager, and nothing of
OpenTelemetry is even imported: the SDK is an extra (``pip install 'blackdrez-server[tracing]'``).

**On.** :func:`configure` (at the node's start) builds the SDK's tracer provider the way every
OpenTelemetry program does from the same variables: the service name from
``OTEL_SERVICE_NAME`` (default ``blackdrez-server``), the node's id as ``service.instance.id``,
``OTEL_RESOURCE_ATTRIBUTES``, the exporters of ``OTEL_TRACES_EXPORTER`` (``otlp``, the default,
over HTTP/protobuf to ``OTEL_EXPORTER_OTLP_ENDPOINT``; ``console``), batched.

**The spans.** ``blackdrez.request`` (server): one client request on the node it came to;
``blackdrez.forward`` (client): the request forwarded to the table's host over the bus, whose
message carries the W3C ``traceparent`` (``bus.Request.trace``); ``blackdrez.serve_forward``
(server): the host serving it, a child of the forward; ``blackdrez.log_append``: the command's
entry written to the table's log. Each says its node (``blackdrez.node``) and table. The JSON
log lines written inside a span carry its ``trace_id`` and ``span_id`` (``server/logs.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

log = logging.getLogger("blackdrez.tracing")

SERVICE = "blackdrez-server"
"""The service name traces carry unless ``OTEL_SERVICE_NAME`` names another."""
tracer: Any = None
"""The tracer of this process, ``None`` while tracing is off (see the module docstring)."""
_provider: Any = None
_kinds: dict[str, Any] = {}
_propagator: Any = None
OFF: AbstractContextManager[None] = contextlib.nullcontext()
"""The one empty block every span is while tracing is off. The hot path (a request, a log
append) does not even enter it: it tests ``tracing.tracer is None`` and runs its code bare."""


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the ``OTEL_*`` environment asks for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters:
        return exporters != "none"
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def configure(node: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on if the environment asks for it (once per process); whether it is on."""
    if tracer is not None or not wanted(environ):
        return tracer is not None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        log.warning(
            "OTEL_* asks for traces but the OpenTelemetry SDK is not installed: "
            "pip install 'blackdrez-server[tracing]'; tracing stays off"
        )
        return False
    attributes = {"service.instance.id": node}
    if not environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = SERVICE
    provider = TracerProvider(resource=Resource.create(attributes))
    for name in (environ.get("OTEL_TRACES_EXPORTER") or "otlp").split(","):
        name = name.strip().lower()
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            log.warning("OTEL_TRACES_EXPORTER %r is not one of otlp, console: left out", name)
    use(provider)
    log.info("tracing on: %s", environ.get("OTEL_TRACES_EXPORTER") or "otlp")
    return True


def use(provider: Any) -> None:
    """Trace with ``provider`` (an SDK ``TracerProvider``; the tests give theirs)."""
    global tracer, _provider, _propagator
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _kinds.update(internal=SpanKind.INTERNAL, server=SpanKind.SERVER, client=SpanKind.CLIENT)
    _propagator = TraceContextTextMapPropagator()
    _provider = provider
    tracer = provider.get_tracer("blackdrez.server")


def stop() -> None:
    """Send what is batched and turn tracing off."""
    global tracer, _provider
    if _provider is not None:
        _provider.shutdown()
    tracer = _provider = None


def span(
    name: str, kind: str = "internal", parent: Any = None, **attributes: Any
) -> AbstractContextManager[Any]:
    """A span around a block (``kind``: internal, server or client; ``parent``: a context from
    :func:`parent_of`, else the current one); a shared empty context manager while off."""
    if tracer is None:
        return OFF
    kept = {key.replace("_", "."): value for key, value in attributes.items() if value is not None}
    started: AbstractContextManager[Any] = tracer.start_as_current_span(
        name, context=parent, kind=_kinds[kind], attributes=kept
    )
    return started


def traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, for a message to another node."""
    if tracer is None:
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent")


def parent_of(traceparent: str | None) -> Any:
    """The context that ``traceparent`` (from another node) names, for :func:`span`."""
    if tracer is None or not traceparent:
        return None
    return _propagator.extract({"traceparent": traceparent})


def current_ids() -> tuple[str, str] | None:
    """The current span's trace and span ids (hex), if tracing is on and a span is open."""
    if tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"
