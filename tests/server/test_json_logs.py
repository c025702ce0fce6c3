"""Structured logs: one JSON object per line, with the node, table and player ids."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from server.logs import JsonFormatter
from server.testing.redis_server import free_port


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


def test_serve_writes_json_lines() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "serve", "--port", str(port), "--node-id", "nj"],
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
