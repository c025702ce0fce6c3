"""Who a request comes from, and how fast each client address may open connections and ask.

Theory of operation
-------------------
A connection counts against its client address: the peer's, or, from a trusted proxy, the
``X-Forwarded-For`` hop it names (:func:`client_address`, read from the right past every
trusted proxy). How fast one address may open new WebSocket connections, and send records API
requests, is limited by a token bucket per address and kind (``handshake_rate``/
``handshake_burst``, ``api_rate``/``api_burst``): a ``hello`` with a token costs every node of a
deployment work (``Node.claim``) and an API request database reads. On a shared store the bucket
is the store's, one for every node (a load balancer spreads an address over them all); while the
store cannot be reached, or answers slower than :data:`LIMIT_TIMEOUT`, this node's own decides.
``blackdrez_rate_limited_total`` counts the refusals. ``/healthz``, ``/metrics`` and static files
are never limited: an orchestrator polls them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
from collections.abc import Sequence

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request

from blackdrez.server.metrics import Metrics
from blackdrez.server.ratelimit import KeyedBuckets
from blackdrez.server.settings import Settings
from blackdrez.server.stores import Stores, StoreUnavailable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
LIMIT_TIMEOUT = 0.5
"""Seconds a handshake or API request waits for the store's shared rate limit before this
node's own decides (the store slow or away must not hold connections up)."""
MAX_ADDRESSES = 100_000
"""Client addresses each flood limit remembers at once (an address unseen long enough for its
bucket to refill is forgotten first; past this, the least recently seen)."""


def client_address(peer: str, forwarded: Sequence[str], trusted: Sequence[Network]) -> str:
    """The address a connection counts against: its peer's, or, when the peer is a trusted
    proxy, the nearest address in ``X-Forwarded-For`` (read from the right) that is not one."""
    hops = [hop.strip() for header in forwarded for hop in header.split(",")]
    address = _plain_ip(peer)
    while hops and address is not None and any(address in network for network in trusted):
        hop = _plain_ip(hops.pop())
        if hop is None:  # the proxy's own entries are well formed: anything else is forged
            break
        address = hop
    return str(address if address is not None else peer)


def _plain_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``text`` as an address (an IPv4 address mapped into IPv6 as IPv4), or None."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _address_limit(rate: float, burst: int) -> KeyedBuckets | None:
    """A flood limit per client address, or ``None`` for a rate or burst of 0 (no limit)."""
    return KeyedBuckets(rate, burst, MAX_ADDRESSES) if rate > 0 and burst > 0 else None


class AddressLimits:
    """Client addresses and their flood limits, for the handshakes and the records API."""

    def __init__(self, settings: Settings, store: Stores, metrics: Metrics) -> None:
        self.store = store
        self.metrics = metrics
        self.trusted = [ipaddress.ip_network(p, strict=False) for p in settings.trusted_proxies]
        self.handshakes = _address_limit(settings.handshake_rate, settings.handshake_burst)
        self.api_requests = _address_limit(settings.api_rate, settings.api_burst)

    def address(self, connection: ServerConnection, request: Request) -> str:
        """The client address a request counts against (see :func:`client_address`)."""
        forwarded = request.headers.get_all("X-Forwarded-For")
        return client_address(connection.remote_address[0], forwarded, self.trusted)

    async def too_fast(self, limit: KeyedBuckets | None, kind: str, address: str) -> float | None:
        """Spend one of ``address``'s requests of ``kind`` under ``limit``: ``None`` if it had
        one, else the seconds until it has (the refusal is counted)."""
        if limit is None:
            return None
        wait: float | None = None
        if self.store.shared and self.store.health.up:  # (known down: no wait for it)
            with contextlib.suppress(StoreUnavailable, TimeoutError):
                async with asyncio.timeout(LIMIT_TIMEOUT):
                    wait = await self.store.tokens.take(kind, address, limit.rate, limit.burst)
        if wait is None:
            wait = 0.0 if limit.take(address, time.monotonic()) else limit.retry_after(address)
        if not wait:
            return None
        self.metrics.rate_limited.labels(kind).inc()
        return wait
