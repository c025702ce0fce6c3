"""Messages between nodes: every bus message is a typed Struct of one tagged union.

Theory of operation
-------------------
Nodes talk over the store's publish/subscribe bus (see ``blackdrez.server.stores.base``) on four
kinds of
channel, and every message on any of them is one of the Structs below, encoded with MessagePack
and decoded by one decoder into its type (never into a plain dict):

* a node's own channel carries :class:`Request` (a client's request for a table that node
  hosts, forwarded by the client's node) and :class:`Reply` (the answer, sent back to the
  requester's node). A reply's messages are decoded as the protocol's server messages, so a
  forwarded ``error`` is a :class:`blackdrez.protocol.v1.Error` like a local one. It also carries
  what
  closes a player's connection there: :class:`SignedOut` and :class:`Replaced`, and what is
  pushed to a player connected there: :class:`Tell`;
* a table's channel carries :class:`TableUpdate`: what the table's host announces, in the same
  store step as the log entry that caused it (with the seats whose players the host now counts
  away, so other nodes can correct it for players still connected to them);
* the lobby channel carries :class:`LobbyChanged` for lobby watchers;
* the handover channel carries :class:`Handover` when a node gives its tables up.
"""

from __future__ import annotations

import msgspec

from blackdrez.protocol import v1
from blackdrez.server.table.commands import Answer, ConnectionChanged, Stop
from blackdrez.server.table.room import Broadcast

HANDOVER_CHANNEL = "bd:handover"


class Request(msgspec.Struct, tag="request", tag_field="bus", kw_only=True):
    """A client's request for a table, forwarded to the table's host."""

    origin: str
    """The requester's node: where the reply goes."""
    rid: int
    player: str
    name: str
    table: str
    message: v1.ClientMessage | ConnectionChanged | Stop
    """``Stop``: an operator closes the table (``blackdrez.server.admin``)."""
    bot: bool = False
    incarnation: str | None = None
    """The requester's node process (``Stores.incarnation``; ``None`` from older versions): the
    host lets its viewers go when that process is gone, even if the node id still heartbeats."""
    trace: str | None = None
    """The W3C ``traceparent`` of the forwarding span while tracing is on (``server.tracing``)."""


class Reply(msgspec.Struct, tag="reply", tag_field="bus", kw_only=True):
    """The host's answer to a :class:`Request`."""

    rid: int
    answer: Answer


class TableUpdate(msgspec.Struct, tag="update", tag_field="bus", kw_only=True):
    """A table's update, for the viewers its host does not serve itself."""

    broadcast: Broadcast
    away: list[int] = []
    """Seats whose players this update marks away (a node that still serves one says so)."""


class LobbyChanged(msgspec.Struct, tag="lobby", tag_field="bus", kw_only=True):
    """Tables added, changed or gone, for lobby watchers."""

    update: v1.LobbyUpdate


class Handover(msgspec.Struct, tag="handover", tag_field="bus", kw_only=True):
    """A node is giving its tables up (graceful shutdown): adopt them now."""

    node: str


class SignedOut(msgspec.Struct, tag="signed_out", tag_field="bus", kw_only=True):
    """An account signed out everywhere: each node closes the account's connection whose token
    is older than ``generation`` (the token generation the revocation made)."""

    player: str
    generation: int


class Replaced(msgspec.Struct, tag="replaced", tag_field="bus", kw_only=True):
    """A player connected on another node: each node closes the player's connection there if
    it is older (its ``order`` is lower: ``Players.next_attach``)."""

    player: str
    order: int
    seated: list[str] = []
    """The tables where the new connection found the player seated: it answers for them, so
    the older connection's close does not count the player away there."""


class Tell(msgspec.Struct, tag="tell", tag_field="bus", kw_only=True):
    """Something pushed to a player wherever they are connected (a challenge, its answer, the
    table it made): the node of their connection sends it, the others drop it."""

    player: str
    message: v1.Challenged | v1.ChallengeAnswered | v1.MatchFound


BusMessage = Request | Reply | TableUpdate | LobbyChanged | Handover | SignedOut | Replaced | Tell

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(BusMessage)


def encode(message: BusMessage) -> bytes:
    """A bus message as the bytes published."""
    return _encoder.encode(message)


def decode(data: bytes) -> BusMessage:
    """A bus message from the bytes received; raises ``msgspec.DecodeError`` if malformed or
    of a type this version does not know (a newer node's: the receiver drops it)."""
    return _decoder.decode(data)
