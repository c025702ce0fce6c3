"""Several nodes in one process, on one in-memory store, under a clock the test turns.

Theory of operation
-------------------
Like h11's ``ConnectionPair`` (two protocol ends wired together with no socket between them),
:class:`Cluster` wires real :class:`~blackdrez.server.node.Node` objects together with nothing
fake in the node itself: each node gets its own bundle of memory stores over one shared
:class:`~blackdrez.server.stores.memory.MemoryWorld` (so they see each other's table logs, leases,
lobby, presence and tokens, and a publish on one node reaches the subscribers on the others), and
clients are :class:`FakeClient` objects whose
:class:`~blackdrez.server.connection.Connection` writes to a :class:`FakeWebSocket`: every frame
the node sends is decoded with the protocol's own decoder and applied as a client would.

**Time.** One :class:`ManualClock` is given to every node (``Node(clock=...)``) and to the
stores (leases, heartbeats and retired records expire by it), and the whole cluster runs on a
:class:`VirtualTimeLoop`, an asyncio loop whose ``time()`` is that clock. The loop moves the
clock only when nothing is ready to run, and then straight to its next timer (like trio's
``MockClock(autojump_threshold=0)``): a test never sleeps for real, and ``await
cluster.advance(2.0)`` runs, in order and at their own times, everything the nodes would have
done in two seconds. The clock is turned this way rather than by calling one-step methods of
the node because the node's periodic work (heartbeats, lease renewals, orphan scans, the
sweeper), the rooms' timers and the routing timeouts are all asyncio sleeps and timers: on a
loop whose time is the clock they run as in production, unmodified and in their real
interleaving, and the node needs no seam for tests. A waiting condition that nothing will ever
meet then shows as a timeout on the virtual clock (:meth:`Cluster.until`, the ``within`` of a
request), not as a hung test. The hint worker's jobs (experts' moves, pars) run inline
(:class:`InlineHints`); other work sent off the loop (threads) is not modelled: the clock could
jump while it runs.

**Processes.** Each node runs in a context of its own (a :mod:`contextvars` variable names its
:class:`HarnessNode`): its tasks inherit it, and its connection to the world's bus
(:class:`NodeBus`) hands each message to the handler in the context the handler subscribed in,
as if in the subscriber's process. The loop runs every callback of a node through that node's
gate, which is how a node is *paused* (its callbacks are held, in order, and run when it is
resumed, late, as after SIGSTOP and SIGCONT: its leases may have lapsed meanwhile, messages sent
to it wait for it) and *killed* (held for good: it never runs again, never heartbeats or renews,
never hands over, and its clients' connections are lost). :meth:`Cluster.stop` is the graceful
stop (the node hands its tables over). A node's bus can be cut (what is published meanwhile is
lost to it, and it is told when the bus is back, as the Redis bus tells it) and its store taken
down (every call fails with ``StoreUnavailable`` until it is brought back). Every node keeps
its finished games and reads ratings through one :class:`HarnessRecords`.

**Clients.** :meth:`Cluster.connect` does what the WebSocket session does after the handshake
(a token signed with the cluster's secret, the player's seated tables read from the store,
``attach`` and ``claim``), and :meth:`FakeClient.request` hands a decoded request to
``Node.handle`` in the node's context and returns its reply. A client keeps, per table, what a
client keeps (sequence number, seat, view, legal actions, events) and notes any gap in the
event numbers it was sent instead of repairing it, so a test can assert that none occurred.

A scenario (``tests/node``)::

    @on_nodes(2)
    async def test_a_dead_nodes_table_is_adopted(cluster: Cluster) -> None:
        a, b = cluster.nodes
        host = await cluster.connect(a, "Host")
        table = (await host.ok(v1.CreateTable())).table.id
        cluster.kill(a)
        await cluster.until(lambda: table in b.rooms, "node b adopts", within=3.0)
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import itertools
import logging
import selectors
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

import msgspec
from websockets.protocol import State

from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS
from blackdrez.protocol.errors import CloseCode
from blackdrez.server import identity
from blackdrez.server.connection import OLDEST, Connection
from blackdrez.server.hints import HintWorker
from blackdrez.server.matchmaking.schedule import ArenaSchedule
from blackdrez.server.metrics import Metrics
from blackdrez.server.node import LEASE_TTL, Node
from blackdrez.server.ratelimit import TokenBucket
from blackdrez.server.stores import Stores, StoreUnavailable
from blackdrez.server.stores.base import Append, Bus, Handler, Settled
from blackdrez.server.stores.memory import MemoryWorld, memory_stores
from blackdrez.server.table.room import GameOver, Room

log = logging.getLogger("blackdrez.harness")

T = TypeVar("T")
P = ParamSpec("P")

MONOTONIC_START = 1_000.0
"""The clock's first monotonic reading (small: its floats stay exact to well below a nanosecond)."""
WALL_START = 1_800_000_000.0
"""The clock's first wall-clock reading (a fixed day, well away from midnight UTC)."""
SETTLE = 1e-6
"""Virtual seconds :meth:`Cluster.settle` lets pass: everything ready runs first."""
POLL = 0.01
"""Virtual seconds between two looks of :meth:`Cluster.until`."""
REQUEST_PATIENCE = 10.0
"""Virtual seconds a request waits for its reply (a paused or killed node gives none)."""
IDLE_PATIENCE = 5.0
"""Real seconds the loop waits for a thread when nothing else is scheduled, before it calls the
scenario deadlocked."""
NO_BUFFER_LIMIT = 1 << 40
"""A client's send buffer limit in the harness: no frame is ever held back."""


class Deadlock(RuntimeError):
    """Nothing can run and nothing is scheduled: the scenario waits for what never comes."""


class NoAnswer(AssertionError):
    """A request got no reply within its patience (its node is paused or dead)."""


class ManualClock:
    """The cluster's clock (the node's :class:`~blackdrez.server.node.clock.Clock`): wall and
    monotonic readings that move together, only when turned."""

    def __init__(self, monotonic: float = MONOTONIC_START, wall: float = WALL_START) -> None:
        self._monotonic = monotonic
        self._wall_offset = wall - monotonic

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        return self._wall_offset + self._monotonic

    def monotonic(self) -> float:
        """Seconds that never go back."""
        return self._monotonic

    def turn(self, seconds: float) -> None:
        """Move both readings ``seconds`` on (the loop does, when it is idle)."""
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._monotonic += seconds


_PROCESS: contextvars.ContextVar[HarnessNode | None] = contextvars.ContextVar(
    "harness_process", default=None
)
"""The node whose process the running code belongs to (``None``: the scenario itself)."""


class _JumpingSelector(selectors.DefaultSelector):
    """The loop's selector: takes what is ready (a thread's result), and when nothing is, turns
    the clock to the loop's next timer instead of waiting for it."""

    def __init__(self, clock: ManualClock, idle_patience: float) -> None:
        super().__init__()
        self._clock = clock
        self._idle_patience = idle_patience

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        events: list[tuple[Any, int]] = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:  # no timer at all: only a thread could still wake the loop
            events = super().select(self._idle_patience)
            if not events:
                raise Deadlock("nothing is scheduled and the scenario still waits")
            return events
        self._clock.turn(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on a :class:`ManualClock`, running each node's callbacks through its gate
    (see the module docstring)."""

    def __init__(self, clock: ManualClock, idle_patience: float = IDLE_PATIENCE) -> None:
        super().__init__(selector=_JumpingSelector(clock, idle_patience))
        self.clock = clock

    def time(self) -> float:
        return self.clock.monotonic()

    def call_soon(  # type: ignore[override]  # (the stubs type each callback's arguments)
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        context = context if context is not None else contextvars.copy_context()
        process = context.get(_PROCESS)
        if process is None or isinstance(callback, Delivery):  # a message is in the bus already
            return super().call_soon(callback, *args, context=context)
        return super().call_soon(process.gate, callback, args, context, context=context)

    def call_at(  # type: ignore[override]  # (likewise)
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        context = context if context is not None else contextvars.copy_context()
        process = context.get(_PROCESS)
        if process is None:
            return super().call_at(when, callback, *args, context=context)
        return super().call_at(when, process.gate, callback, args, context, context=context)


def run(
    scenario: Callable[[Cluster], Awaitable[None]],
    nodes: int = 2,
    *,
    wall: float = WALL_START,
    **options: Any,
) -> None:
    """Run ``scenario`` on a new cluster of ``nodes`` nodes (``options``: :class:`Cluster`'s),
    its clock reading ``wall`` at first, on its own virtual-time loop; the cluster is torn
    down after, whatever happened."""
    clock = ManualClock(wall=wall)

    async def main() -> None:
        cluster = Cluster(clock, **options)
        try:
            for _ in range(nodes):
                await cluster.add_node()
            await scenario(cluster)
        finally:
            await cluster.close()

    with asyncio.Runner(loop_factory=functools.partial(VirtualTimeLoop, clock)) as runner:
        runner.run(main())


def on_nodes(
    nodes: int = 2, **options: Any
) -> Callable[[Callable[[Cluster], Any]], Callable[[], None]]:
    """Make ``async def test_x(cluster)`` a plain test function run by :func:`run`."""

    def decorate(scenario: Callable[[Cluster], Any]) -> Callable[[], None]:
        def test() -> None:
            run(scenario, nodes, **options)

        test.__name__ = scenario.__name__
        test.__qualname__ = scenario.__qualname__
        test.__doc__ = scenario.__doc__
        test.__module__ = scenario.__module__
        return test

    return decorate


class InlineExecutor(concurrent.futures.Executor):
    """Runs each job at once, in the caller's thread."""

    def submit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> concurrent.futures.Future[T]:
        """Run ``fn`` now; its outcome in a future already done."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future


class InlineHints(HintWorker):
    """The hint worker with its jobs (experts' moves, pars) run inline rather than in worker
    processes, which the virtual clock could not wait for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("ahead", False)  # (inline, a move's hint ahead would hold up the move)
        super().__init__(*args, **kwargs)

    def _executor(self) -> concurrent.futures.Executor:  # type: ignore[override]  # any executor
        return InlineExecutor()


class HarnessRecords:
    """The records of finished games as a node sees them (``GameRecords``): every submitted
    game kept, every rating the initial one; ``failing`` plays a records database that is
    down."""

    def __init__(self) -> None:
        self.games: list[GameOver] = []
        self.failing = False
        self.reads = 0
        self.generations: dict[str, int] = {}
        """Each account's token generation (players without one have no account)."""

    def submit(self, games: Iterable[GameOver]) -> None:
        """Keep games whose end is logged."""
        self.games.extend(games)

    async def written(self, table: str) -> bool:
        """Every game submitted is kept at once."""
        return True

    async def seat_ratings(self, game: str, players: list[str]) -> dict[str, v1.SeatRating]:
        """The initial rating of each of ``players`` (``ConnectionError`` while ``failing``)."""
        self.reads += 1
        if self.failing:
            raise ConnectionError("the records database is down")
        rating = v1.SeatRating(ordinal=0.0, mu=25.0, sigma=25 / 3, games=0, provisional=True)
        return dict.fromkeys(players, rating)

    async def token_generations(self, players: list[str]) -> dict[str, int]:
        """The current token generation of each of ``players`` who has an account."""
        return {p: self.generations[p] for p in players if p in self.generations}


class Reachable:
    """One store of a node's bundle, whose calls fail with :class:`StoreUnavailable` (reported
    to the bundle's health, as a Redis store reports it) while the harness holds the store
    down (:meth:`Cluster.take_store_down`)."""

    def __init__(self, part: Any, node: HarnessNode) -> None:
        self._part = part
        self._node = node

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._part, name)
        if name == "append_soon":  # (an append whose outcome a callback is given)
            return self._append_soon
        if not asyncio.iscoroutinefunction(attribute):
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            self._node.store_calls[name] += 1
            if self._node.store_down:
                error = StoreUnavailable("the harness holds the store down")
                self._node.stores.health.failed(error)
                raise error
            return await attribute(*args, **kwargs)

        return call

    def _append_soon(self, append: Append, settled: Settled) -> None:
        self._node.store_calls["append_soon"] += 1
        if self._node.store_down:
            error = StoreUnavailable("the harness holds the store down")
            self._node.stores.health.failed(error)
            settled(error)
            return
        self._part.append_soon(append, settled)


REACHABLE_PARTS = ("lobby", "players", "presence", "leases", "logs", "leaderboards", "daily")
"""The stores of a bundle that fail while its store is down (the bus is cut apart:
:meth:`Cluster.cut_bus`; the tokens are the WebSocket sessions', which the harness does not run)."""


class FakeProtocol:
    """The part of websockets' sans-I/O protocol a :class:`Connection` writes to."""

    def __init__(self, received: Callable[[str | bytes], None]) -> None:
        self._state = State.OPEN
        self.extensions: list[object] = []
        self._received = received

    @property
    def state(self) -> State:
        """As websockets' (whose ``_state`` the connection reads for each frame)."""
        return self._state

    @state.setter
    def state(self, state: State) -> None:
        self._state = state

    def send_text(self, data: bytes, fin: bool = True) -> None:
        self._received(data.decode())

    def send_binary(self, data: bytes, fin: bool = True) -> None:
        self._received(bytes(data))


class FakeTransport:
    """The write buffer a :class:`Connection` watches: ``backlog`` bytes the client has not
    read (a test sets it to play a slow reader)."""

    def __init__(self, ws: FakeWebSocket) -> None:
        self._ws = ws
        self.backlog = 0
        self.writes = 0
        """Writes made to this connection (each may carry several frames)."""

    def write(self, data: bytes) -> None:
        """Frames as the server writes them (unmasked, final): each to the client."""
        self.writes += 1
        view, at = memoryview(data), 0
        while at < len(view):
            first, size = view[at], view[at + 1] & 0x7F
            at += 2
            if size == 126:
                size, at = int.from_bytes(view[at : at + 2]), at + 2
            elif size == 127:
                size, at = int.from_bytes(view[at : at + 8]), at + 8
            payload = bytes(view[at : at + size])
            at += size
            self._ws.protocol.send_text(
                payload
            ) if first == 0x81 else self._ws.protocol.send_binary(payload)

    def get_write_buffer_size(self) -> int:
        return self.backlog

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return 2**13, 2**15  # (websockets' default: low, high)

    def abort(self) -> None:
        self._ws.lost(None)


class FakeWebSocket:
    """A stand-in for ``websockets.asyncio.server.ServerConnection``: frames go straight to the
    client; closing ends the session as the server's would."""

    def __init__(self, received: Callable[[str | bytes], None], ended: Callable[[], None]) -> None:
        self.protocol = FakeProtocol(received)
        self.transport = FakeTransport(self)
        self.send_in_progress: object | None = None
        self.logger = log
        self.close_code: int | None = None
        self.close_reason = ""
        self._ended = ended

    @property
    def paused(self) -> bool:
        """Past the high-water mark, as the transport tells websockets' connection."""
        return self.transport.backlog > self.transport.get_write_buffer_limits()[1]

    def send_data(self) -> None:
        """The frames are with the client already."""

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.lost(code, reason)

    def lost(self, code: int | None, reason: str = "") -> None:
        """The connection is gone (closed with ``code``, or cut: ``None``)."""
        if self.protocol.state is State.CLOSED:
            return
        self.protocol.state = State.CLOSED
        self.close_code, self.close_reason = code, reason
        self._ended()


@dataclass
class Seen:
    """What a client knows of one table, as a real client keeps it."""

    id: str
    seq: int = 0
    seat: int | None = None
    info: v1.TableInfo | None = None
    view: Any = None
    legal: list[Any] = field(default_factory=list)
    deadline: float | None = None
    events: list[v1.Numbered] = field(default_factory=list)
    """Every event received, in order."""
    gaps: list[tuple[int, int]] = field(default_factory=list)
    """Each time events were missed: the number held, and the first one received after it."""

    def event_types(self) -> list[str]:
        """The type of each event received, in order."""
        return [numbered.event["type"] for numbered in self.events]


async def served(node: Node, connection: Connection, message: Any) -> None:
    """``message`` served as the session's reader serves it (``server.session``): after the
    answer to an action still out to the store, an action without a coroutine where it can be
    (``Node.act_soon``), everything else handled."""
    if connection.acting:
        await node.acted(connection)
    if type(message) is v1.Act and node.act_soon(connection, message):
        if connection.acting:
            await node.acted(connection)
        return
    await node.handle(connection, message)


class FakeClient:
    """One player's connection to one node (see the module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        home: HarnessNode,
        token: identity.Token,
        *,
        bot: bool,
        binary: bool,
        seated: list[str],
        new: bool,
    ) -> None:
        self.cluster = cluster
        self.node = home
        self.token = token
        self.player = token.player
        self.name = token.name
        self.received: list[Any] = []
        """Every message the node sent, decoded."""
        self.pushed: list[Any] = []
        """The messages that answer no request (lobby changes, errors nobody asked for)."""
        self.replies: dict[int, Any] = {}
        """The first reply to each request, by id."""
        self.tables: dict[str, Seen] = {}
        self.lobby: dict[str, v1.TableInfo] = {}
        self.seated = seated
        """The tables where the player held a seat when this connection was made."""
        self.ended = False
        """The session ended (the node was told, unless its process is dead)."""
        self.ws = FakeWebSocket(self._receive, self._ended)
        self.connection = Connection(
            ws=self.ws,  # type: ignore[arg-type]  # the part of ServerConnection it uses
            binary=binary,
            player=token.player,
            name=token.name,
            bucket=TokenBucket(1e9, 1_000_000, cluster.clock.monotonic()),
            max_buffer=NO_BUFFER_LIMIT,
            token=token,
            bot=bot,
            seated=list(seated),
            order=OLDEST if new else None,
            outbox=home.node.outbox,
        )
        self._ids = itertools.count(1)
        self._decoder = SERVER_DECODERS[1]

    @property
    def closed(self) -> bool:
        """The connection is closed (by either end, or lost)."""
        return self.ws.protocol.state is State.CLOSED

    @property
    def close_code(self) -> int | None:
        """The code the node closed the connection with (``None``: not closed, or lost)."""
        return self.ws.close_code

    def table(self, table: str) -> Seen:
        """What this client knows of ``table`` (it must have joined, spectated or resynced)."""
        return self.tables[table]

    async def request(self, message: Any, *, within: float = REQUEST_PATIENCE) -> Any:
        """Send ``message`` (given the next request id) and return its reply. Raises
        :class:`NoAnswer` if none comes within ``within`` virtual seconds."""
        request_id = next(self._ids)
        message = msgspec.structs.replace(message, id=request_id)
        handled = self.node.spawn(served(self.node.node, self.connection, message))
        try:
            async with asyncio.timeout(within):
                await asyncio.shield(handled)
        except TimeoutError:
            raise NoAnswer(f"{type(message).__name__} got no reply from {self.node.id}") from None
        reply = self.replies.get(request_id)
        if reply is None:
            raise NoAnswer(f"{type(message).__name__} was answered with nothing")
        return reply

    async def ok(self, message: Any) -> Any:
        """:meth:`request`, and the reply must not be an error."""
        reply = await self.request(message)
        assert not isinstance(reply, v1.Error), f"{type(message).__name__} refused: {reply}"
        return reply

    async def resync(self, table: str) -> Any:
        """Ask for what this client missed at ``table``."""
        seen = self.tables.get(table)
        return await self.request(v1.Resync(table=table, since=seen.seq if seen else 0))

    async def leave(self) -> None:
        """Close the connection (the session ends on the node, as when a client goes)."""
        if not self.closed:
            self.ws.lost(1000, "bye")
        await self.cluster.settle()

    def _ended(self) -> None:
        """The session ends: the node forgets the client (``Node.detach``), unless its process
        is dead (then nothing of it runs)."""
        self.connection.closing = True
        if not self.ended:
            self.ended = True
            self.node.spawn(self.node.node.detach(self.connection))

    def _receive(self, frame: str | bytes) -> None:
        message = self._decoder.decode(frame)
        self.received.append(message)
        request_id = getattr(message, "id", None)
        if request_id is not None:
            self.replies.setdefault(request_id, message)
        match message:
            case v1.Joined():
                seen = self.tables.setdefault(message.table.id, Seen(message.table.id))
                seen.seat, seen.info = message.seat, message.table
            case v1.Snapshot():
                self._apply_snapshot(message)
            case v1.Update():
                self._apply_update(message)
            case v1.Tables():
                self.lobby = {info.id: info for info in message.tables}
            case v1.LobbyUpdate():
                for info in message.tables:
                    self.lobby[info.id] = info
                for gone in message.removed:
                    self.lobby.pop(gone, None)
                self.pushed.append(message)
            case _ if request_id is None:
                self.pushed.append(message)

    def _apply_snapshot(self, snapshot: v1.Snapshot) -> None:
        seen = self.tables.setdefault(snapshot.table, Seen(snapshot.table))
        if snapshot.seq < seen.seq:
            return
        seen.seq, seen.seat, seen.info = snapshot.seq, snapshot.seat, snapshot.info
        seen.view, seen.legal, seen.deadline = snapshot.view, snapshot.legal, snapshot.deadline

    def _apply_update(self, update: v1.Update) -> None:
        seen = self.tables.get(update.table)
        if seen is None or update.seq < seen.seq:
            return
        events = [e for e in update.events if e.seq > seen.seq]
        if update.events and not events:
            return
        if update.seq > seen.seq and (not events or events[0].seq != seen.seq + 1):
            seen.gaps.append((seen.seq, events[0].seq if events else update.seq))
        seen.events.extend(events)
        seen.seq = update.seq
        seen.view, seen.legal, seen.deadline = update.view, update.legal, update.deadline
        if update.info is not None:
            seen.info = update.info
            seen.seat = next(
                (i for i, s in enumerate(update.info.seats) if s and s.player == self.player),
                None,
            )


class Delivery:
    """One subscription's handler as the world's bus calls it: in the publisher's turn, it
    drops the message if the subscriber's bus is cut, else hands it to the handler in the
    subscriber's own process (so a paused subscriber gets it when it runs again)."""

    def __init__(self, bus: NodeBus, handler: Handler, context: contextvars.Context) -> None:
        self._bus = bus
        self._handler = handler
        self._context = context

    def __call__(self, data: bytes) -> None:
        if not self._bus.cut:
            asyncio.get_running_loop().call_soon(self._handler, data, context=self._context)


class NodeBus(Bus):
    """A node's connection to the world's bus, which a test can cut (:meth:`Cluster.cut_bus`):
    what is published meanwhile never reaches the node's handlers, and once it is restored the
    node is told (``on_recovered``), as the Redis bus tells it after an outage. Each node has its
    own (its ``on_recovered`` is its own)."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self.cut = False
        self._deliveries: dict[tuple[str, Handler], Delivery] = {}

    async def publish(self, channel: str, data: bytes) -> None:
        await self._bus.publish(channel, data)

    async def subscribe(self, channel: str, handler: Handler) -> None:
        if self.cut:  # as Redis's bus, whose subscription waits for a link that is down
            raise StoreUnavailable(f"bus cut: cannot subscribe to {channel}")
        delivery = Delivery(self, handler, contextvars.copy_context())
        self._deliveries[channel, handler] = delivery
        await self._bus.subscribe(channel, delivery)

    async def unsubscribe(self, channel: str, handler: Handler) -> None:
        delivery = self._deliveries.pop((channel, handler), None)
        if delivery is not None:
            await self._bus.unsubscribe(channel, delivery)


Held = tuple[Callable[..., object], Sequence[Any], contextvars.Context]


class HarnessNode:
    """One node of the cluster: the :class:`Node`, its stores, and its process's state."""

    def __init__(
        self, cluster: Cluster, node_id: str, make_node: Callable[[HarnessNode], Node]
    ) -> None:
        self.cluster = cluster
        self.id = node_id
        self.store_down = False
        """The harness holds this node's store down (:meth:`Cluster.take_store_down`)."""
        self.store_calls: collections.Counter[str] = collections.Counter()
        """Calls this node made to its stores (the bus's apart), by method name."""
        stores = memory_stores(node_id, world=cluster.world)
        self.bus = NodeBus(stores.bus)
        parts: dict[str, Any] = {  # (each stands in for the store it wraps)
            name: Reachable(getattr(stores, name), self) for name in REACHABLE_PARTS
        }
        self.stores: Stores = dataclasses.replace(stores, bus=self.bus, **parts)
        self.node = make_node(self)
        self.paused = False
        self.dead = False
        self.held: list[Held] = []
        """Callbacks that came due while the process was paused (or after it died)."""
        self.clients: list[FakeClient] = []
        self._context = contextvars.copy_context()
        self._context.run(_PROCESS.set, self)

    def spawn(self, coroutine: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``coroutine`` as a task of this node's process."""
        return asyncio.get_running_loop().create_task(coroutine, context=self._context.copy())

    def gate(
        self, callback: Callable[..., object], args: Sequence[Any], context: contextvars.Context
    ) -> None:
        """Run one of this process's callbacks, or hold it while the process is stopped."""
        if self.paused or self.dead:
            self.held.append((callback, args, context))
        else:
            callback(*args)

    def release(self) -> None:
        """Run what was held, in order (the process runs again)."""
        loop = asyncio.get_running_loop()
        held, self.held = self.held, []
        for callback, args, context in held:
            loop.call_soon(callback, *args, context=context)

    @property
    def rooms(self) -> dict[str, Room]:
        """The rooms this node hosts."""
        return self.node.hosting.rooms


async def _call(function: Callable[[], object]) -> None:
    """Call ``function`` (as a task of the process it is spawned in)."""
    function()


class Cluster:
    """Nodes on one memory world, clients connected to them, and the clock (module docstring).
    ``lease_ttl``: every node's; ``bots``: whether the nodes can start the bots a host adds;
    ``arena_schedule``: every node's scheduled arenas."""

    def __init__(
        self,
        clock: ManualClock,
        *,
        lease_ttl: float = LEASE_TTL,
        bots: bool = True,
        arena_schedule: Sequence[ArenaSchedule] = (),
    ) -> None:
        self.clock = clock
        self.arena_schedule = tuple(arena_schedule)
        self.world = MemoryWorld(monotonic=clock.monotonic)
        """What every node's stores share."""
        self.lease_ttl = lease_ttl
        self.nodes: list[HarnessNode] = []
        self.secret = b"the cluster's token secret"
        self.bots: list[FakeClient] = []
        """Every bot a host added, connected to the host's node."""
        self.records = HarnessRecords()
        """The records database every node writes finished games to and reads ratings from."""
        self.bots_come = True
        """Whether the bots a host adds connect and sit down (``False``: they never come)."""
        self._bots = bots
        self._seeds = itertools.count(1)
        self._names = itertools.count(1)

    async def add_node(self, node_id: str | None = None) -> HarnessNode:
        """Start one more node (``node_id``: a node restarted under its id)."""
        node_id = node_id or f"n{len(self.nodes) + 1}"

        def make_node(harnessed: HarnessNode) -> Node:
            node = Node(
                harnessed.stores,
                Metrics(),
                clock=self.clock,
                lease_ttl=self.lease_ttl,
                seed_source=lambda: f"seed-{next(self._seeds)}",
                hints=InlineHints(),
                spawn_bot=functools.partial(self._spawn_bot, harnessed) if self._bots else None,
                arena_schedule=self.arena_schedule,
            )
            node.bind_records(self.records, self.records.token_generations)
            return node

        harnessed = HarnessNode(self, node_id, make_node)
        self.nodes.append(harnessed)
        await harnessed.spawn(harnessed.node.start())
        return harnessed

    async def connect(
        self,
        node: HarnessNode,
        name: str | None = None,
        *,
        token: identity.Token | None = None,
        bot: bool = False,
        binary: bool = False,
    ) -> FakeClient:
        """A client greeted by ``node``: a new player, or the holder of ``token`` coming back."""
        new = token is None
        if token is None:
            name = name or f"Player {next(self._names)}"
            token = identity.issue_token(
                self.secret, identity.new_player_id(), name, self.clock.time()
            )
        seated: list[str] = []
        if not new:
            with contextlib.suppress(StoreUnavailable):  # (as the session: seated nowhere)
                seated = await node.stores.players.tables(token.player)
        client = FakeClient(self, node, token, bot=bot, binary=binary, seated=seated, new=new)
        node.clients.append(client)
        await node.spawn(self._greeted(node, client))
        return client

    async def reconnect(self, client: FakeClient, node: HarnessNode) -> FakeClient:
        """``client``'s player connects again, to ``node``, with its token, keeping what it knew
        of its tables (as a client that lost its connection does; its old one is let go)."""
        if not client.closed:
            await client.leave()
        back = await self.connect(node, token=client.token, binary=client.connection.binary)
        back.tables = client.tables
        back.lobby = client.lobby
        return back

    @staticmethod
    async def _greeted(node: HarnessNode, client: FakeClient) -> None:
        """What the session does once a client is greeted (``Sessions._play``)."""
        older = node.node.attach(client.connection)
        if older is not None:
            older.close(CloseCode.REPLACED, "you connected again elsewhere")
        await node.node.claim(client.connection)

    def _spawn_bot(
        self, node: HarnessNode, table: str, strategy: str, invite: str | None, name: str
    ) -> str:
        """A bot the host added: it connects to the host's node and sits down at ``table``."""
        token = identity.issue_token(self.secret, identity.new_player_id(), name, self.clock.time())
        if not self.bots_come:
            return token.player

        async def come() -> None:
            bot = await self.connect(node, name, token=token, bot=True)
            self.bots.append(bot)
            await bot.request(v1.JoinTable(table=table, invite=invite))

        node.spawn(come())
        return token.player

    async def settle(self) -> None:
        """Let everything that can run now run (no time passes, to within a microsecond)."""
        await asyncio.sleep(SETTLE)

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass on the clock: everything due meanwhile runs, at its time. The
        clock then reads ``seconds`` later at least (the loop runs a timer due within its
        resolution a little early, and times added up in many steps drift)."""
        until = self.clock.monotonic() + seconds
        await asyncio.sleep(seconds)
        self.clock.turn(max(0.0, until - self.clock.monotonic()))

    async def until(
        self, condition: Callable[[], bool], what: str = "the condition", within: float = 10.0
    ) -> None:
        """Let time pass until ``condition`` holds; fail if it still does not after ``within``
        virtual seconds."""
        deadline = self.clock.monotonic() + within
        while not condition():
            if self.clock.monotonic() >= deadline:
                raise AssertionError(f"{what}: not after {within} s")
            await asyncio.sleep(POLL)

    def pause(self, node: HarnessNode) -> None:
        """Stop ``node``'s process (SIGSTOP): nothing of it runs until :meth:`resume`."""
        node.paused = True

    def resume(self, node: HarnessNode) -> None:
        """Let a paused node run again: what came due meanwhile runs now, late."""
        node.paused = False
        node.release()

    def kill(self, node: HarnessNode) -> None:
        """Kill ``node``'s process (SIGKILL): it never runs again, and its clients' connections
        are lost (they see no close code)."""
        node.dead = True
        for client in node.clients:
            client.ws.lost(None)

    def take_store_down(self, node: HarnessNode) -> None:
        """``node``'s store stops answering: each call fails and the node learns it is down."""
        node.store_down = True

    async def bring_store_back(self, node: HarnessNode) -> None:
        """``node``'s store answers again (its health says so, as its probe would)."""
        node.store_down = False
        node.spawn(_call(node.stores.health.succeeded))
        await self.settle()

    def cut_bus(self, node: HarnessNode) -> None:
        """``node`` loses its bus connection: what is published meanwhile never reaches it."""
        node.bus.cut = True

    async def restore_bus(self, node: HarnessNode) -> None:
        """``node``'s bus connection is back: it is told, and catches up."""
        node.bus.cut = False
        recovered = node.bus.on_recovered
        if recovered is not None:
            node.spawn(_call(recovered))
        await self.settle()

    async def stop(self, node: HarnessNode) -> None:
        """Stop ``node`` gracefully: it hands its tables over; its clients are disconnected."""
        await node.spawn(node.node.stop("server shutting down"))
        for client in node.clients:
            client.ws.lost(CloseCode.GOING_AWAY, "server shutting down")
        await self.settle()

    async def restart(self, node: HarnessNode) -> HarnessNode:
        """Kill ``node`` and start a new process under its id at once."""
        self.kill(node)
        return await self.add_node(node.id)

    async def close(self) -> None:
        """Tear everything down: every process runs again, long enough to be cancelled."""
        for node in self.nodes:
            node.paused = node.dead = False
            node.release()
        loop = asyncio.get_running_loop()
        me = asyncio.current_task(loop)
        for task in asyncio.all_tasks(loop):
            if task is not me:
                task.cancel()
        await asyncio.gather(
            *(t for t in asyncio.all_tasks(loop) if t is not me), return_exceptions=True
        )
