"""The store interface: what the server keeps outside one process.

Theory of operation
-------------------
A store holds what several server processes (nodes) must share: the lobby's table records, which
node hosts each table, which tables a player sits at, node presence (heartbeats with a TTL), the
solitaire leaderboards, and a publish/subscribe bus for live updates and for forwarding requests to
the node that hosts a table. :class:`~server.stores.memory.MemoryStore` keeps it all in one
process (the default; nothing to install); :class:`~server.stores.redis.RedisStore` keeps it in
Redis so any number of nodes share one lobby.

Payloads are bytes (MessagePack): the store never interprets them. Every key that belongs to one
table carries the table id as a Redis Cluster hash tag (``bd:t:{ID}:...``) so a table's keys live in
one slot. When the store cannot be reached a method raises :class:`StoreUnavailable`; the caller
answers ``unavailable`` and changes nothing.
"""

from __future__ import annotations

import abc
from collections.abc import Callable

Handler = Callable[[bytes], None]
"""A subscriber: called in the event loop with each message published on its channel."""

LOBBY_CHANNEL = "bd:lobby"


def node_channel(node_id: str) -> str:
    """The channel a node listens on for requests and replies addressed to it."""
    return f"bd:node:{node_id}"


def table_channel(table_id: str) -> str:
    """The channel a table's host publishes the table's updates on."""
    return f"bd:t:{{{table_id}}}:updates"


class StoreUnavailable(Exception):
    """The store cannot be reached now; nothing was changed."""


class LeaseLost(Exception):
    """Another node now hosts the table: this node must stop hosting it. Nothing was written."""


class Store(abc.ABC):
    """Shared state for one or many server nodes (see the module docstring)."""

    shared: bool = False
    """True when other processes may share this store (so the bus crosses processes)."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.on_bus_recovered: Callable[[], None] | None = None
        """Called when the bus is back after an outage: messages sent meanwhile are lost."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Connect; called once before use."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Disconnect and stop every subscription."""

    # ------------------------------------------------------------------ secrets
    @abc.abstractmethod
    async def shared_secret(self, proposed: bytes) -> bytes:
        """Return the secret all nodes sign tokens with: ``proposed`` if none was set before."""

    # ------------------------------------------------------------------ lobby records
    @abc.abstractmethod
    async def put_table(self, table_id: str, node_id: str, record: bytes, listed: bool) -> None:
        """Create or replace a table's record and note the node hosting it.

        ``listed`` tables appear in :meth:`list_tables` (public BlackDrez tables).
        """

    @abc.abstractmethod
    async def get_table(self, table_id: str) -> tuple[str, bytes] | None:
        """Return ``(hosting node, record)`` for a table, or ``None``."""

    @abc.abstractmethod
    async def remove_table(self, table_id: str) -> None:
        """Forget a table."""

    @abc.abstractmethod
    async def list_tables(self) -> list[bytes]:
        """Return the records of every listed table."""

    # ------------------------------------------------------------------ players
    @abc.abstractmethod
    async def add_player_table(self, player: str, table_id: str) -> None:
        """Note that ``player`` holds a seat at ``table_id``."""

    @abc.abstractmethod
    async def remove_player_table(self, player: str, table_id: str) -> None:
        """Forget that ``player`` holds a seat at ``table_id``."""

    @abc.abstractmethod
    async def player_tables(self, player: str) -> list[str]:
        """Return the tables where ``player`` holds a seat."""

    # ------------------------------------------------------------------ presence
    @abc.abstractmethod
    async def heartbeat(self, ttl: float) -> None:
        """Mark this node alive for ``ttl`` seconds."""

    @abc.abstractmethod
    async def live_nodes(self) -> set[str]:
        """Return the nodes whose last heartbeat has not expired."""

    # ------------------------------------------------------------------ leaderboards
    @abc.abstractmethod
    async def submit_score(self, game: str, player: str, name: str, score: int) -> None:
        """Record a finished solitaire score; a player's board entry keeps their best."""

    @abc.abstractmethod
    async def top_scores(self, game: str, limit: int) -> list[tuple[str, str, int]]:
        """Return up to ``limit`` ``(player, name, score)``, best first (ties: earlier first)."""

    # ------------------------------------------------------------------ hosting
    # A table is hosted by the node holding its lease (a key with a TTL that the host renews).
    # Its log holds every command that changed it, in order: enough to rebuild it elsewhere.

    @abc.abstractmethod
    async def acquire_lease(self, table_id: str, ttl: float) -> bool:
        """Take the table's lease if nobody holds it; mark the table hosted. True if taken."""

    @abc.abstractmethod
    async def renew_leases(self, table_ids: list[str], ttl: float) -> set[str]:
        """Extend this node's leases (re-taking any that lapsed); return the ids another node
        holds now."""

    @abc.abstractmethod
    async def release_lease(self, table_id: str) -> None:
        """Give the lease up (if this node holds it) so another node adopts the table."""

    @abc.abstractmethod
    async def orphaned_tables(self) -> list[str]:
        """Tables still hosted (not retired) whose lease nobody holds."""

    @abc.abstractmethod
    async def append_log(
        self, table_id: str, entry: bytes, channel: str = "", announce: bytes | None = None
    ) -> None:
        """Append a command to the table's log, only while this node holds its lease (else
        :class:`LeaseLost`, nothing written); then, in the same step, publish ``announce`` (the
        update the command caused) on ``channel``, so no update goes out unlogged."""

    @abc.abstractmethod
    async def read_log(self, table_id: str) -> list[bytes]:
        """The table's whole log, oldest first."""

    @abc.abstractmethod
    async def retire_table(self, table_id: str, keep_log: float) -> None:
        """The table is closed: no longer hosted, its lease gone, its log kept ``keep_log`` s."""

    # ------------------------------------------------------------------ bus
    @abc.abstractmethod
    async def publish(self, channel: str, data: bytes) -> None:
        """Send ``data`` to every subscriber of ``channel`` in every node."""

    @abc.abstractmethod
    async def subscribe(self, channel: str, handler: Handler) -> None:
        """Call ``handler`` with each message published on ``channel`` from now on."""

    @abc.abstractmethod
    async def unsubscribe(self, channel: str, handler: Handler) -> None:
        """Stop calling ``handler`` for ``channel``."""

    # ------------------------------------------------------------------ revoked session tokens
    @abc.abstractmethod
    async def revoke_token(self, token_id: str, ttl: float) -> None:
        """Remember for ``ttl`` seconds (the token's remaining lifetime) that the token is ended."""

    @abc.abstractmethod
    async def token_revoked(self, token_id: str) -> bool:
        """Whether the token was revoked (and would not have expired yet)."""
