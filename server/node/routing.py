"""Routing: each client request answered here, or forwarded to the node hosting its table.

Theory of operation
-------------------
:meth:`Routing._dispatch` answers what needs no table (lobby, solitaire start, leaderboards) and
hands table requests to :meth:`Routing.route`: a table hosted here runs the command locally; one
hosted elsewhere (per the store's whereabouts) is forwarded as a ``bus.Request`` on the host's
node channel and its ``bus.Reply`` relayed, within :data:`REMOTE_TIMEOUT`. A forwarded request
is served by the host as if its client were connected there. A table whose host stopped
heartbeating is answered ``moving`` without forwarding (its lease lapses within a TTL and another
node adopts it), and requests already forwarded to that host are answered at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import msgspec

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server import bus
from blackdrez.server.connection import Connection
from blackdrez.server.stores import StoreUnavailable
from blackdrez.server.stores.base import Whereabouts, node_channel
from blackdrez.server.table.commands import Answer, ConnectionChanged
from blackdrez.server.table.room import RoomError

log = logging.getLogger("blackdrez.node")

REMOTE_TIMEOUT = 3.0

SOLITAIRE_GRACE = 3600.0


def error_answer(
    request: Any, code: ErrorCode, message: str, retry_after: float | None = None
) -> Answer:
    """The answer refusing ``request`` (``retry_after``: with ``rate_limited``)."""
    error = v1.Error(
        id=getattr(request, "id", None), code=code, message=message, retry_after=retry_after
    )
    return Answer(replies=[error])


def moving_answer(request: Any) -> Answer:
    return error_answer(request, ErrorCode.MOVING, "the table is moving to another node: try again")


def closed_answer(request: Any, table: str) -> Answer:
    """``not_found``; whoever still watched the table watches it no more."""
    answer = error_answer(request, ErrorCode.NOT_FOUND, f"table {table!r} is closed")
    answer.unwatch = table
    return answer


def refused(answer: Answer) -> bool:
    return any(isinstance(reply, v1.Error) for reply in answer.replies)


class Routing:
    """Requests handled here or forwarded to the table's host."""

    async def _dispatch(self, client: Connection, message: Any) -> Answer:
        now = self.clock()
        match message:
            case v1.Ping():
                return Answer(replies=[v1.Pong(id=message.id, time=now)])
            case v1.ListTables():
                return Answer(replies=[v1.Tables(id=message.id, tables=await self.list_tables())])
            case v1.WatchLobby():
                await self._hear_lobby()  # before the list: no change falls between the two
                tables = await self.list_tables()
                client.lobby = True
                self.lobby_watchers.add(client)
                return Answer(replies=[v1.Tables(id=message.id, tables=tables)])
            case v1.UnwatchLobby():
                client.lobby = False
                self._stop_watching_lobby(client)
                return Answer(replies=[v1.Ok(id=message.id)])
            case v1.CreateTable() | v1.QuickJoin() | v1.StartSolitaire() if self.stopping:
                return error_answer(message, ErrorCode.UNAVAILABLE, "this node is shutting down")
            case v1.CreateTable():
                problems = message.options.problems()
                if problems:
                    return error_answer(message, ErrorCode.BAD_MESSAGE, "; ".join(problems))
                return await self._create_and_sit(client, message.options, message.id)
            case v1.QuickJoin():
                return await self._quick_join(client, message)
            case v1.StartSolitaire():
                return await self._start_solitaire(client, message)
            case v1.GetDaily():
                return await self._daily(message)
            case v1.GetLeaderboard():
                return await self._leaderboard(message)
            case v1.GetRecord():
                return await self._kept_record(message)
            case v1.Hello():
                return error_answer(
                    message, ErrorCode.ALREADY_GREETED, "hello was already answered"
                )
            case _:
                table = getattr(message, "table", None)
                if not isinstance(table, str):
                    return error_answer(message, ErrorCode.UNKNOWN_TYPE, "unknown request")
                return await self.route(client.player, client.name, table, message, bot=client.bot)

    async def route(
        self, player: str, name: str, table: str, message: Any, *, bot: bool = False
    ) -> Answer:
        """Execute a table request here if this node hosts the table, else forward it to the
        table's host; ``moving`` while it has none, ``not_found`` if it does not exist."""
        room = self.rooms.get(table)
        if room is not None:
            answer = await self._execute(room, player, name, message, bot=bot)
            self._viewed_through(table, player, self.id, self.store.incarnation)
            return answer
        if table in self._closing:
            return closed_answer(message, table)
        place = await self.store.locate(table)
        if place.where is Whereabouts.CLOSED:
            return closed_answer(message, table)
        if place.where is Whereabouts.UNKNOWN:
            return error_answer(message, ErrorCode.NOT_FOUND, f"no table {table!r}")
        if (
            place.where is Whereabouts.MOVING
            or place.node == self.id
            or place.node is None
            or place.node in self._silent  # its lease lapses soon: forwarding would wait for it
            or not await self._heartbeating(place.node)  # none such, or gone: it never answers
        ):
            self._scan_soon()  # an orphan, or this node's own (from its earlier process)
            return moving_answer(message)
        if isinstance(message, v1.JoinTable | v1.Spectate | v1.Resync):
            await self._follow(table)  # before the request, so no update can slip between
        answer = None
        try:
            answer = await self._forward(place.node, player, name, table, message, bot)
            return answer
        finally:
            # Followed on for a requester about to watch the table (``_deliver_answer``):
            # subscribing again would lose what is published meanwhile.
            if answer is None or answer.watch is None or answer.watch[0] != table:
                await self._unfollow_if_unwatched(table)

    async def _heartbeating(self, node: str) -> bool:
        """Whether ``node`` was heartbeating at the last orphan scan, or is now (it may have
        started since: asked of the store then)."""
        if self._live is None or node in self._live:
            return True
        self._live = await self.store.live_nodes()
        return node in self._live

    async def _forward(
        self, host: str, player: str, name: str, table: str, message: Any, bot: bool
    ) -> Answer:
        rid = next(self._rids)
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        self._forwarded[rid] = host
        try:
            request = bus.Request(
                origin=self.id,
                rid=rid,
                player=player,
                name=name,
                table=table,
                message=message,
                bot=bot,
                incarnation=self.store.incarnation,
            )
            await self.store.publish(node_channel(host), bus.encode(request))
            return await asyncio.wait_for(future, REMOTE_TIMEOUT)
        finally:
            self._pending.pop(rid, None)
            self._forwarded.pop(rid, None)

    def _give_up_on(self, nodes: set[str]) -> None:
        """Stop waiting for the answers of requests forwarded to nodes that stopped
        heartbeating: their requesters hear "did not answer" now, not after REMOTE_TIMEOUT, and
        retry once the table has moved (whether a dead host ran the request is unknown, as
        after a timeout)."""
        for rid, host in list(self._forwarded.items()):
            future = self._pending.get(rid)
            if host in nodes and future is not None and not future.done():
                future.set_exception(TimeoutError(f"node {host} stopped heartbeating"))

    def _viewed_through(self, table: str, player: str, node: str, incarnation: str | None) -> None:
        """Note the node ``player`` asked through, and which process of it (``None``: a node of
        an older version does not say), while they sit or watch at ``table`` (still hosted
        here: it may have moved meanwhile); else forget it (one entry per viewer)."""
        room = self.rooms.get(table)
        if room is not None and (room.seat_of(player) is not None or player in room.spectators):
            self._viewed_from.setdefault(table, {})[player] = (node, incarnation)
        elif table in self._viewed_from:
            self._viewed_from[table].pop(player, None)

    def _viewers_gone(self, stopped: set[str], beating: dict[str, str | None]) -> None:
        """Nodes stopped heartbeating (killed, or stopped: a stopping node leaves the presence
        of its viewers to the tables' hosts), or heartbeat as another process than the one a
        viewer asked through (restarted under the same node id within the heartbeat TTL, so it
        never stopped): the players at tables hosted here whose last request came through a
        process gone are away, and its spectators leave, as when a connection closes
        (``Node.detach``); a player back since, through another node or the new process, has
        asked through that one. ``beating``: every live node and its process
        (``Store.live_incarnations``)."""
        for table, viewers in list(self._viewed_from.items()):
            room = self.rooms.get(table)
            if room is None:
                continue
            for player, (node, incarnation) in list(viewers.items()):
                if node in stopped or beating.get(node, incarnation) != incarnation:
                    del viewers[player]
                    seated = room.seat_of(player) is not None
                    self._spawn(self._gone_away(player, "", table, seated=seated))

    async def _gone_away(self, player: str, name: str, table: str, *, seated: bool) -> None:
        """``player`` has no connection to ``table`` any more: away from their seat, or no
        longer watching (a refusal, say they were not there, changes nothing)."""
        message: Any = (
            ConnectionChanged(table=table, connected=False)
            if seated
            else v1.LeaveTable(table=table)
        )
        with contextlib.suppress(StoreUnavailable, RoomError, TimeoutError):
            await self.route(player, name, table, message)

    def _on_node_message(self, data: bytes) -> None:
        try:
            message = bus.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable bus message dropped")
            return
        match message:
            case bus.Reply():
                future = self._pending.get(message.rid)
                if future is not None and not future.done():
                    future.set_result(message.answer)
            case bus.Request():
                self._spawn(self._serve_forward(message))
            case bus.SignedOut():
                self.close_signed_out(message.player, message.generation)
            case bus.Replaced():
                self.close_replaced(message.player, message.order, message.seated)
            case _:
                log.warning("unexpected %s on this node's channel", type(message).__name__)

    async def _serve_forward(self, request: bus.Request) -> None:
        message = request.message
        # The requester's node may follow the table now (it subscribes first): announce it
        # again ("Quiet tables" in ``blackdrez.server.node.hosting``).
        self._tables_asked += 1
        lease = self._leases.get(request.table)
        if lease is not None:
            lease.quiet = False
        room = self.rooms.get(request.table)
        if room is None:
            closed = request.table in self._closing
            answer = closed_answer(message, request.table) if closed else moving_answer(message)
        else:
            try:
                answer = await self._execute(
                    room, request.player, request.name, message, bot=request.bot
                )
                self._viewed_through(
                    request.table, request.player, request.origin, request.incarnation
                )
            except Exception:
                log.exception("forwarded request %r failed", message)
                answer = error_answer(
                    message, ErrorCode.INTERNAL, "the server failed on this request"
                )
        reply = bus.Reply(rid=request.rid, answer=answer)
        with contextlib.suppress(StoreUnavailable):
            await self.store.publish(node_channel(request.origin), bus.encode(reply))
