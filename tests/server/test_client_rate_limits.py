"""The client library waits out ``rate_limited`` as long as the server says, then sends the
request again: a bot author's request succeeds after the limit's window instead of failing."""

from __future__ import annotations

import time

import pytest

from blackdrez.clients.client import RateLimited, ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode

TIGHT = {"messages_per_second": 2.0, "burst": 2}
"""Two messages at once, then one every half second."""


async def spend_the_burst(client) -> None:
    for _ in range(TIGHT["burst"]):
        await client.request(v1.Ping())


async def test_a_rate_limited_request_is_sent_again_after_the_servers_delay(
    make_server, connect
) -> None:
    server = await make_server(**TIGHT)
    client = await connect(server, name="Pacer", pace=False)
    await spend_the_burst(client)
    started = time.monotonic()
    reply = await client.request(v1.Ping())
    assert isinstance(reply, v1.Pong)
    assert time.monotonic() - started >= 0.4  # it waited for the next token (0.5 s)
    assert not client.closed.done()


async def test_with_retries_off_a_rate_limited_request_raises_with_the_delay(
    make_server, connect
) -> None:
    server = await make_server(**TIGHT)
    client = await connect(server, name="Impatient", rate_limit_retries=0, pace=False)
    await spend_the_burst(client)
    with pytest.raises(RateLimited) as limited:
        await client.request(v1.Ping())
    assert isinstance(limited.value, ServerError)
    assert limited.value.code == ErrorCode.RATE_LIMITED
    assert 0.0 < limited.value.retry_after <= 0.5
    client.rate_limit_retries = 3  # the switch is the client's to turn at any time
    assert isinstance(await client.request(v1.Ping()), v1.Pong)


async def test_a_delay_longer_than_the_clients_patience_is_raised_at_once(
    make_server, connect
) -> None:
    server = await make_server(messages_per_second=0.01, burst=1)  # one message per 100 s
    client = await connect(server, name="Slowed")
    await client.request(v1.Ping())
    started = time.monotonic()
    with pytest.raises(RateLimited) as limited:
        await client.request(v1.Ping())
    assert time.monotonic() - started < 1.0
    assert limited.value.retry_after > 90.0


async def test_retries_are_bounded_then_the_error_is_raised(make_server, connect) -> None:
    server = await make_server()
    client = await connect(server, name="Unlucky", rate_limit_retries=2)
    sent = 0

    async def always_limited(message, timeout):
        nonlocal sent
        sent += 1
        return v1.Error(
            id=1, code=ErrorCode.RATE_LIMITED, message="too many messages", retry_after=0.01
        )

    client._request_once = always_limited
    with pytest.raises(RateLimited):
        await client.request(v1.Ping())
    assert sent == 3  # the request and two retries
