"""The tokens contract (``Tokens``): the shared secret, revoked session tokens."""

from __future__ import annotations

import asyncio

from blackdrez.server.stores.base import (
    Stores,
)


async def test_shared_secret_first_proposal_wins(stores: Stores) -> None:
    assert await stores.tokens.shared_secret(b"first") == b"first"
    assert await stores.tokens.shared_secret(b"second") == b"first"


async def test_a_revoked_token_is_remembered_until_its_ttl_ends(stores: Stores) -> None:
    assert not await stores.tokens.revoked("abc")
    await stores.tokens.revoke("abc", 0.3)
    await stores.tokens.revoke("long", 60.0)
    assert await stores.tokens.revoked("abc")
    assert not await stores.tokens.revoked("abd")
    await asyncio.sleep(0.5)
    assert not await stores.tokens.revoked("abc")
    assert await stores.tokens.revoked("long")


async def test_a_rate_limits_bucket_spends_its_burst_then_says_how_long_to_wait(
    stores: Stores,
) -> None:
    assert [await stores.tokens.take("handshake", "192.0.2.7", 2.0, 2) for _ in range(2)] == [0, 0]
    wait = await stores.tokens.take("handshake", "192.0.2.7", 2.0, 2)
    assert 0.4 < wait <= 0.5, "empty: a token comes back in half a second at 2 a second"
    assert await stores.tokens.take("api", "192.0.2.7", 2.0, 2) == 0.0, "another kind: its own"
    assert await stores.tokens.take("handshake", "192.0.2.8", 2.0, 2) == 0.0, "another address"
    await asyncio.sleep(wait)
    assert await stores.tokens.take("handshake", "192.0.2.7", 2.0, 2) == 0.0
