"""Log output: plain lines for a terminal, or one JSON object per line for a log pipeline.

Theory of operation
-------------------
``blackdrez serve --log-format json`` (env ``BLACKDREZ_LOG_FORMAT``) installs
:class:`JsonFormatter` on the root logger. Each record becomes one line with ``time`` (ISO 8601,
UTC), ``level``, ``logger``, ``node`` (the node id), ``message``, and, on every line about a
table or a player, ``table`` and ``player``: taken from the record's ``extra`` when a call gives
them, else found in the message by the ids' fixed shapes (``t``/``s`` and 10 hex digits for a
table or session, ``p_`` and 16 URL-safe characters for a player). A traceback goes in ``error``.

A database outage is expected: the PostgreSQL driver's pool retries its connections (on its own
backoff, up to a minute) and warns each time with a traceback, the same every time. Its
warnings (:data:`ONE_LINE_LOGGERS`) keep one line, the error's text in place of the traceback
(:class:`OneLine`); errors keep theirs.
"""

from __future__ import annotations

import datetime
import json
import logging
import re

from blackdrez.server import tracing

TABLE_ID = re.compile(r"\b[ts][0-9a-f]{10}\b")
PLAYER_ID = re.compile(r"\bp_[A-Za-z0-9_-]{16}(?![A-Za-z0-9_-])")
FORMATS = ("plain", "json")
ONE_LINE_LOGGERS = ("asyncpg.pool",)
"""Libraries whose warnings, tracebacks of an expected outage, are kept to one line."""


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        line: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "node": self.node,
            "message": message,
        }
        for key, pattern in (("table", TABLE_ID), ("player", PLAYER_ID)):
            given = getattr(record, key, None)
            found = pattern.search(message)
            if given is not None:
                line[key] = str(given)
            elif found is not None:
                line[key] = found.group()
        traced = tracing.current_ids()  # (None at once while tracing is off)
        if traced is not None:
            line["trace_id"], line["span_id"] = traced
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class OneLine(logging.Filter):
    """A warning (or less) with a traceback becomes one line: the message and the error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.levelno < logging.ERROR:
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {error!r}"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


def configure(log_format: str, node: str, level: int = logging.INFO) -> None:
    """Send the server's logs to standard error, as plain lines or as JSON lines."""
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter(node))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ONE_LINE_LOGGERS:
        library = logging.getLogger(name)
        if not any(isinstance(f, OneLine) for f in library.filters):
            library.addFilter(OneLine())
