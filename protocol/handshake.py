"""Version negotiation: the part of the protocol that never changes.

The first message a client sends, in JSON or MessagePack, is ``hello`` listing every protocol
version it speaks. The server picks the highest version both speak and answers ``welcome`` with it,
or answers ``error`` with code ``unsupported_version`` and the versions it supports, then closes
with code 4001. Everything after ``welcome`` is in the chosen version's module
(``blackdrez.protocol.v1``).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

SUPPORTED_VERSIONS: tuple[int, ...] = (1,)


class Hello(
    msgspec.Struct, tag="hello", tag_field="type", kw_only=True, forbid_unknown_fields=False
):
    """Client -> server, the first message. Unknown fields are ignored: old servers accept new
    clients."""

    versions: list[int]
    name: str | None = None
    """Display name for a new guest (ignored when ``token`` brings back a known player)."""
    token: str | None = None
    """A session token from an earlier ``welcome``: the same player, seats and sessions."""
    client: str | None = None
    """Free text naming the client program, for logs."""


def negotiate(offered: Iterable[int], supported: Iterable[int] = SUPPORTED_VERSIONS) -> int | None:
    """Return the highest version in both ``offered`` and ``supported``, or ``None``."""
    common = set(offered) & set(supported)
    return max(common) if common else None
