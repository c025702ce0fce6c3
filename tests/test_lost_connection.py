"""A Redis master killed mid-read can leave redis-py failing again while it cleans up: the
pub/sub reader then logged the second error as an unhandled failure, with a traceback (the
fault suite's master-kill scenario failed on it, once in several runs). Such a chain is a lost
connection; and the fault suite's traceback finder shows a chain's last exception."""

from __future__ import annotations

import redis.exceptions

from blackdrez.server.stores.redis_link import lost_connection
from tests.faults.history import unhandled


def chained(first: BaseException, then: BaseException) -> BaseException:
    """``then`` as raised while handling ``first``."""
    try:
        try:
            raise first
        except BaseException:
            raise then  # noqa: B904 (the implicit context is the point)
    except BaseException as error:
        return error


def test_an_error_raised_while_handling_a_lost_connection_is_a_lost_connection() -> None:
    closed = redis.exceptions.ConnectionError("Connection closed by server.")
    assert lost_connection(closed)
    assert lost_connection(chained(closed, AttributeError("'NoneType' has no attribute 'read'")))
    assert lost_connection(chained(ConnectionResetError(), RuntimeError("cleanup failed")))
    assert not lost_connection(ValueError("a bug of ours"))
    assert not lost_connection(chained(KeyError("x"), ValueError("a bug of ours")))
    loop = ValueError("a cycle")
    loop.__context__ = KeyError("back")
    loop.__context__.__context__ = loop
    assert not lost_connection(loop)


def test_the_traceback_finder_shows_a_chains_last_exception() -> None:
    lines = [
        "2026-12-02 02:26:38,812 server.stores.redis redis pub/sub reader failed; reconnecting",
        "Traceback (most recent call last):",
        '  File "redis/_parsers/base.py", line 589, in _readline',
        "    raise ConnectionError(SERVER_CLOSED_CONNECTION_ERROR)",
        "redis.exceptions.ConnectionError: Connection closed by server.",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "redis/asyncio/client.py", line 900, in parse_response',
        "    return await conn.read_response()",
        "AttributeError: 'NoneType' object has no attribute 'read_response'",
        "2026-12-02 02:26:39,000 blackdrez.store the next log line",
    ]
    (found,) = unhandled(lines)
    assert found.endswith("AttributeError: 'NoneType' object has no attribute 'read_response'")
    assert "Connection closed by server." in found
