"""Structured logs: one JSON object per line, with the node, table and player ids."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from blackdrez.server.logs import ONE_LINE_LOGGERS, JsonFormatter, OneLine, configure
from blackdrez.server.testing.redis_server import free_port


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("blackdrez.node", logging.WARNING, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


def test_table_and_player_ids_are_fields_of_the_lines_about_them() -> None:
    formatter = JsonFormatter("node7")
    line = json.loads(formatter.format(record("lease of %s lost", "t0123456789")))
    assert line["node"] == "node7" and line["level"] == "warning"
    assert line["table"] == "t0123456789" and "player" not in line
    assert line["message"] == "lease of t0123456789 lost"
    player = "p_AbCdEfGh_-123456"
    line = json.loads(formatter.format(record("kicked %s from %s", player, "sfedcba9876")))
    assert (line["table"], line["player"]) == ("sfedcba9876", player)
    line = json.loads(formatter.format(record("no ids here", table="tX", player="pY")))
    assert (line["table"], line["player"]) == ("tX", "pY")
    assert "table" not in json.loads(formatter.format(record("t0123 is no table id")))


def test_a_traceback_stays_inside_its_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        failed = record("request failed")
        failed.exc_info = sys.exc_info()
    text = JsonFormatter("n").format(failed)
    assert "\n" not in text
    assert "ValueError: boom" in json.loads(text)["error"]


def test_the_database_pools_outage_warnings_are_one_line_each(capsys) -> None:
    """The PostgreSQL pool warns with a traceback at each failed reconnection during an outage:
    a node's log keeps the warning and the error on one line; a library's error keeps its
    traceback."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    pool = logging.getLogger("asyncpg.pool")
    try:
        configure("plain", "n1")
        configure("plain", "n1")  # configured again (a test's second node): one filter
        assert sum(isinstance(f, OneLine) for f in pool.filters) == 1
        for level in (logging.WARNING, logging.ERROR):
            try:
                raise ConnectionRefusedError(111, "Connect call failed")
            except ConnectionRefusedError:
                pool.log(
                    level, "Failed to restore the pool connection floor; retrying", exc_info=True
                )
        lines = capsys.readouterr().err.splitlines()
        assert lines[0].endswith(
            "asyncpg.pool Failed to restore the pool connection floor; retrying: "
            "ConnectionRefusedError(111, 'Connect call failed')"
        )
        assert "Traceback (most recent call last):" in lines[2], lines
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        for name in ONE_LINE_LOGGERS:
            for found in [f for f in logging.getLogger(name).filters if isinstance(f, OneLine)]:
                logging.getLogger(name).removeFilter(found)


def test_serve_writes_json_lines() -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "blackdrez.tools.cli",
            "serve",
            "--port",
            str(port),
            "--node-id",
            "nj",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "BLACKDREZ_LOG_FORMAT": "json"},
    )
    try:
        assert process.stderr is not None
        line = json.loads(process.stderr.readline())
        assert line["node"] == "nj" and line["logger"] == "blackdrez.server"
        assert f"listening on 127.0.0.1:{port}" in line["message"]
    finally:
        process.terminate()
        process.wait(10)
