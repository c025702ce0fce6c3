"""Routing: a table request answered here, or forwarded to the node hosting its table.

Theory of operation
-------------------
The node answers what needs no table itself (``Node.handle``: lobby, solitaire start,
leaderboards) and hands table requests to :meth:`Routing.route`: a table hosted here runs the
command locally (``blackdrez.server.node.hosting``); one hosted elsewhere (per the store's
whereabouts) is forwarded as a ``bus.Request`` on the host's node channel and its ``bus.Reply``
relayed, within :data:`REMOTE_TIMEOUT`. A forwarded request is served by the host as if its
client were connected there (:meth:`Routing.serve_forward`), and the host notes which node (and
which process of it) the player asked through. A table whose host stopped heartbeating is
answered ``moving`` without forwarding (its lease lapses within a TTL and another node adopts
it), and requests already forwarded to that host are answered at once.

:class:`Routing` owns the requests forwarded and not answered yet, and this node's view of the
live nodes: each orphan scan tells it what it heard (:meth:`Routing.nodes_heard`), and a
routing miss asks the store again. Its collaborators are given to it: hosting, fan-out (a
table's updates are followed before a watcher's request is forwarded), a way to spawn
background tasks, and the node's call to look for orphans soon.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server import bus, tracing
from blackdrez.server.node.seams import (
    REQUEST_FAILED,
    Spawn,
    closed_answer,
    error_answer,
    moving_answer,
)
from blackdrez.server.stores import Stores, StoreUnavailable
from blackdrez.server.stores.base import Whereabouts, node_channel
from blackdrez.server.table.commands import Answer, ConnectionChanged
from blackdrez.server.table.room import RoomError

if TYPE_CHECKING:
    from blackdrez.server.node.fanout import Fanout
    from blackdrez.server.node.hosting import Hosting

log = logging.getLogger("blackdrez.node")

REMOTE_TIMEOUT = 3.0

SOLITAIRE_GRACE = 3600.0


class Routing:
    """Table requests handled here or forwarded to the table's host."""

    def __init__(
        self,
        store: Stores,
        hosting: Hosting,
        fanout: Fanout,
        *,
        spawn: Spawn,
        scan_soon: Callable[[], None],
    ) -> None:
        self.store = store
        self.id = store.node_id
        self.incarnation = store.incarnation
        """This process's incarnation (fixed: told with every command routed here)."""
        self.hosting = hosting
        self.fanout = fanout
        self._spawn = spawn
        self._scan_soon = scan_soon
        """Looks for orphans soon (failover): a table found moving, or this node's own."""
        self._rids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Answer]] = {}
        """The answer awaited for each request forwarded from here, by request id."""
        self._forwarded: dict[int, str] = {}
        """The node each pending forwarded request went to."""
        self.silent: set[str] = set()
        """Nodes seen to stop heartbeating (until they do again): their tables' requests are
        answered ``moving`` here rather than forwarded to a node that is likely dead."""
        self.live: set[str] | None = None
        """The nodes heartbeating at the last orphan scan or routing miss (``None`` before the
        first scan): a table whose lease names a node that is not is answered ``moving`` here,
        not forwarded to a node that would never answer."""

    async def route(
        self, player: str, name: str, table: str, message: Any, *, bot: bool = False
    ) -> Answer:
        """Execute a table request here if this node hosts the table, else forward it to the
        table's host; ``moving`` while it has none, ``not_found`` if it does not exist."""
        hosting = self.hosting
        room = hosting.rooms.get(table)
        if room is not None:
            executed = await hosting.execute(room, player, name, message, bot=bot)
            hosting.viewed_through(table, player, self.id, self.incarnation)
            return executed
        if table in hosting.closing:
            return closed_answer(message, table)
        place = await self.store.leases.locate(table)
        if place.where is Whereabouts.CLOSED:
            return closed_answer(message, table)
        if place.where is Whereabouts.UNKNOWN:
            return error_answer(message, ErrorCode.NOT_FOUND, f"no table {table!r}")
        if (
            place.where is Whereabouts.MOVING
            or place.node == self.id
            or place.node is None
            or place.node in self.silent  # its lease lapses soon: forwarding would wait for it
            or not await self._heartbeating(place.node)  # none such, or gone: it never answers
        ):
            self._scan_soon()  # an orphan, or this node's own (from its earlier process)
            return moving_answer(message)
        if isinstance(message, v1.JoinTable | v1.Spectate | v1.Resync):
            await self.fanout.follow(table)  # before the request, so no update can slip between
        answer: Answer | None = None
        try:
            answer = await self._forward(place.node, player, name, table, message, bot)
            return answer
        finally:
            # Followed on for a requester about to watch the table (``Node._deliver_answer``):
            # subscribing again would lose what is published meanwhile.
            if answer is None or answer.watch is None or answer.watch[0] != table:
                await self.fanout.unfollow_if_unwatched(table)

    async def _heartbeating(self, node: str) -> bool:
        """Whether ``node`` was heartbeating at the last orphan scan, or is now (it may have
        started since: asked of the store then)."""
        if self.live is None or node in self.live:
            return True
        self.live = await self.store.presence.live_nodes()
        return node in self.live

    async def _forward(
        self, host: str, player: str, name: str, table: str, message: Any, bot: bool
    ) -> Answer:
        rid = next(self._rids)
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        self._forwarded[rid] = host
        try:
            with tracing.span(
                "blackdrez.forward", "client", blackdrez_node=self.id, blackdrez_host=host,
                blackdrez_table=table,
            ):  # fmt: skip
                request = bus.Request(
                    origin=self.id,
                    rid=rid,
                    player=player,
                    name=name,
                    table=table,
                    message=message,
                    bot=bot,
                    incarnation=self.store.incarnation,
                    trace=tracing.traceparent(),
                )
                await self.store.bus.publish(node_channel(host), bus.encode(request))
                return await asyncio.wait_for(future, REMOTE_TIMEOUT)
        except BaseException:
            if future.done() and not future.cancelled():
                future.exception()  # given up on while the publish failed: read here, or nowhere
            raise
        finally:
            self._pending.pop(rid, None)
            self._forwarded.pop(rid, None)

    def answered(self, reply: bus.Reply) -> None:
        """The answer of a request forwarded from here came back (dropped if given up on)."""
        future = self._pending.get(reply.rid)
        if future is not None and not future.done():
            future.set_result(reply.answer)

    def nodes_heard(
        self, beating: dict[str, str | None], gone: set[str], before: dict[str, str | None]
    ) -> None:
        """An orphan scan read the live nodes and their processes (``beating``; ``before``: at
        the last scan; ``gone``: those no longer there). Requests forwarded to a node gone are
        given up on; when a node went, came or restarted under its id, the viewers of tables
        hosted here who asked through a process gone are counted away."""
        live = set(beating)
        if gone:
            self._give_up_on(gone)
        if beating != before:
            for player, table, seated in self.hosting.viewers_gone(gone, beating):
                self._spawn(self.gone_away(player, "", table, seated=seated))
        self.silent = (self.silent | gone) - live
        self.live = live

    def _give_up_on(self, nodes: set[str]) -> None:
        """Stop waiting for the answers of requests forwarded to nodes that stopped
        heartbeating: their requesters hear "did not answer" now, not after REMOTE_TIMEOUT, and
        retry once the table has moved (whether a dead host ran the request is unknown, as
        after a timeout)."""
        for rid, host in list(self._forwarded.items()):
            future = self._pending.get(rid)
            if host in nodes and future is not None and not future.done():
                future.set_exception(TimeoutError(f"node {host} stopped heartbeating"))

    async def gone_away(self, player: str, name: str, table: str, *, seated: bool) -> None:
        """``player`` has no connection to ``table`` any more: away from their seat, or no
        longer watching (a refusal, say they were not there, changes nothing)."""
        message: Any = (
            ConnectionChanged(table=table, connected=False)
            if seated
            else v1.LeaveTable(table=table)
        )
        with contextlib.suppress(StoreUnavailable, RoomError, TimeoutError):
            await self.route(player, name, table, message)

    async def serve_forward(self, request: bus.Request) -> None:
        """Serve a request another node forwarded here, and send it the answer."""
        with tracing.span(
            "blackdrez.serve_forward", "server", tracing.parent_of(request.trace),
            blackdrez_node=self.id, blackdrez_origin=request.origin, blackdrez_table=request.table,
            blackdrez_message=type(request.message).__name__,
        ):  # fmt: skip
            await self._serve_forward(request)

    async def _serve_forward(self, request: bus.Request) -> None:
        message = request.message
        hosting = self.hosting
        hosting.asked(request.table)  # before it runs: the requester's node may follow it now
        room = hosting.rooms.get(request.table)
        if room is None:
            closed = request.table in hosting.closing
            answer = closed_answer(message, request.table) if closed else moving_answer(message)
        else:
            try:
                answer = await hosting.execute(
                    room, request.player, request.name, message, bot=request.bot
                )
                hosting.viewed_through(
                    request.table, request.player, request.origin, request.incarnation
                )
            except Exception:
                log.exception("forwarded request %r failed", message)
                answer = error_answer(message, ErrorCode.INTERNAL, REQUEST_FAILED)
        reply = bus.Reply(rid=request.rid, answer=answer)
        with contextlib.suppress(StoreUnavailable):
            await self.store.bus.publish(node_channel(request.origin), bus.encode(reply))
