"""Players for the fault scenarios: real clients that seat themselves, play, and remember.

A player here is the bots' client (:mod:`blackdrez.clients.bots`): it plays its seat with a
reference
strategy over the public protocol and records, in a :class:`~blackdrez.clients.bots.BotResult`, the
event
number of every action the server acknowledged and the last view it saw. Unlike the swarm's bot it
can be held (``gate``: it sends nothing while the gate is closed, so a scenario can tell what a
node does on its own), it gives up only when its game stalls or keeps refusing it (to be reported
by the history checker, not to hang the test), and it leaves its table after the game so the
table closes at once. Every client keeps the frames it received, so a scenario can
count the errors the server sent, including those answered to the client library's own resyncs.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from blackdrez.clients.bots import BotResult, check_fairness
from blackdrez.clients.client import Client, ServerError
from blackdrez.games.blackdrez import bots as blackdrez_bots
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS

RETRYABLE = frozenset({"unavailable", "moving", "not_your_turn"})
"""Errors a player meets while its table moves or a timer acts first: look again and retry."""
NEVER = ("not_found", "internal")
"""Errors a player of a live table must never hear: its table exists, and nothing may fail."""
STALL = 20.0
"""Seconds without the update a player waits for after which its game counts as stalled."""
GATE_POLL = 1.0
"""Seconds between looks at the scenario's gate while a player waits (see ``_progress``)."""
GIVE_UP_AFTER = 25
"""Other errors in a row after which a player stops trying (its game is reported unfinished)."""
STRATEGIES = ("threshold", "bust_probability")


def fault_options(**overrides: Any) -> v1.TableOptions:
    """Table options for fault scenarios: short games, no pause, long enough timers."""
    options: dict[str, Any] = {
        "seats": 3,
        "max_rounds": 8,
        "round_pause_seconds": 0.0,
        "turn_seconds": 30.0,
        "grace_seconds": 30.0,
    }
    options.update(overrides)
    return v1.TableOptions(**options)


async def connect(url: str, *, also: Sequence[str] = (), **options: Any) -> Client:
    """A binary, recording client that reconnects (to ``also`` in turn) unless told not to.

    It introduces itself as an ordinary client, not a bot: the tables treat it as a person."""
    options.setdefault("name", "Player")
    options.setdefault("reconnect", True)
    return await Client.connect(url, binary=True, record=True, also=tuple(also), **options)


async def request(client: Client, message: Any, deadline: float = 30.0) -> Any:
    """Send a request, retrying while the table moves; return the reply."""
    end = time.monotonic() + deadline
    while True:
        try:
            return await client.request(message, timeout=min(10.0, deadline))
        except ServerError as error:
            if error.code not in RETRYABLE or time.monotonic() > end:
                raise
        except (ConnectionError, TimeoutError):
            if time.monotonic() > end:
                raise
        await asyncio.sleep(0.2)


@dataclass
class Table:
    """One table of a scenario and its players' clients (the first one is the host)."""

    id: str
    clients: list[Client]
    results: list[BotResult] = field(default_factory=list)

    def over(self) -> bool:
        """Whether any of its players has seen the game end."""
        return any(game_over(client, self.id) for client in self.clients)

    def seq(self) -> int:
        """The highest event number any of its players holds."""
        return max(c.tables[self.id].seq for c in self.clients if self.id in c.tables)


async def open_table(
    urls: Sequence[str], options: v1.TableOptions, *, host_url: str | None = None
) -> Table:
    """Seat ``options.seats`` players (the host on ``host_url`` or the first URL, the others
    spread over ``urls``), ready them and start the game."""
    host_url = host_url or urls[0]
    order = [host_url, *(u for u in urls if u != host_url)]
    clients = [
        await connect(order[i % len(order)], also=urls, name=f"P{i}") for i in range(options.seats)
    ]
    try:
        joined = await request(clients[0], v1.CreateTable(options=options))
        table = joined.table.id
        for client in clients[1:]:
            await request(client, v1.JoinTable(table=table))
        for client in clients:
            await request(client, v1.SetReady(table=table))
        await request(clients[0], v1.StartGame(table=table))
        for client in clients:
            await client.wait_until(lambda c=client: c.tables[table].view is not None, 30)
    except BaseException:
        await close_all(clients)
        raise
    return Table(table, clients)


async def open_tables(urls: Sequence[str], count: int, options: v1.TableOptions) -> list[Table]:
    """Open ``count`` tables at once, table ``i`` hosted by the node at ``urls[i % len(urls)]``."""
    opened = await asyncio.gather(
        *(open_table(urls, options, host_url=urls[i % len(urls)]) for i in range(count)),
        return_exceptions=True,
    )
    tables = [t for t in opened if isinstance(t, Table)]
    failures = [t for t in opened if not isinstance(t, Table)]
    if failures:
        await close_all([c for t in tables for c in t.clients])
        raise failures[0]
    return tables


def results_of(tables: Sequence[Table]) -> list[BotResult]:
    """Every player's record of every table."""
    return [result for table in tables for result in table.results]


def clients_of(tables: Sequence[Table]) -> list[Client]:
    """Every player's client of every table."""
    return [client for table in tables for client in table.clients]


async def act_on_turn(
    clients: Sequence[Client], table: str, timeout: float = 30.0
) -> tuple[Client, int]:
    """Play one move for whichever client is on turn; return it and the acknowledged event."""
    async with asyncio.timeout(timeout):
        while True:
            for client in clients:
                move = next_move(client, table)
                if move is None:
                    continue
                state = client.tables[table]
                seq = state.seq
                try:
                    ok = await client.act(table, move)
                except ServerError as error:
                    if error.code not in RETRYABLE:
                        raise
                    break
                await client.wait_until(lambda s=seq, st=state: st.seq > s, timeout=timeout)
                return client, ok.seq
            await asyncio.sleep(0.05)


def seat_of(client: Client, table: str) -> int:
    """The client's seat at ``table`` (a resync answered with events does not say it)."""
    state = client.tables[table]
    if state.seat is not None:
        return state.seat
    seats = state.info.seats if state.info is not None else []
    return next((i for i, s in enumerate(seats) if s and s.player == client.player), -1)


def game_over(client: Client, table: str) -> bool:
    """Whether ``client`` has seen the game at ``table`` end."""
    state = client.tables.get(table)
    return bool(state and state.view and state.view["phase"] == "over")


def next_move(client: Client, table: str, strategy: str = "threshold") -> Any:
    """The reference bot's choice for the client's seat now, or ``None`` if it is not on turn."""
    state = client.tables[table]
    if not state.legal or state.view is None or game_over(client, table):
        return None
    view = msgspec.convert(state.view, blackdrez.View)
    legal = [msgspec.convert(action, blackdrez.Action) for action in state.legal]
    return blackdrez_bots.STRATEGIES[strategy](view, legal)


async def play(
    client: Client,
    table: str,
    *,
    strategy: str = "threshold",
    think: float = 0.05,
    deadline: float = 90.0,
    gate: asyncio.Event | None = None,
    leave: bool = True,
) -> BotResult:
    """Play the client's seat until the game ends or ``deadline`` seconds pass, then leave.

    Never raises for the game's sake: a game it could not finish (past the deadline, or no
    update for :data:`STALL` seconds while the gate was open) has ``final`` set to ``None`` and
    ``problem`` saying why, for the history checker to report.
    """
    state = client.tables[table]
    result = BotResult(table=table, seat=seat_of(client, table), player=client.player)
    refusals = 0
    try:
        async with asyncio.timeout(deadline):
            while not game_over(client, table):
                if gate is not None:
                    await gate.wait()
                await _progress(client, lambda: state.legal or game_over(client, table), gate)
                if think:
                    await asyncio.sleep(think)
                if gate is not None and not gate.is_set():
                    continue
                move = next_move(client, table, strategy)
                if move is None:
                    continue
                seq = state.seq
                try:
                    ok = await client.act(table, move)
                except (ConnectionError, TimeoutError):
                    await asyncio.sleep(0.2)  # it reconnects by itself
                    continue
                except ServerError as error:
                    if error.code not in RETRYABLE:
                        refusals += 1
                        if refusals >= GIVE_UP_AFTER:
                            result.problem = f"gave up after {refusals} errors ({error.code})"
                            return result
                    await asyncio.sleep(0.2)
                    continue
                refusals = 0
                result.actions += 1
                result.acked.append(ok.seq)
                await _progress(
                    client, lambda s=seq: state.seq > s or game_over(client, table), gate
                )
    except _Stalled:
        result.problem = f"the game stalled: no update for {STALL:.0f} s"
        return result
    except TimeoutError:
        result.problem = f"the game did not end within {deadline:.0f} s"
        return result
    except ConnectionError as error:
        result.problem = f"the connection was lost for good: {error}"
        return result
    result.final = state.view
    result.problem = check_fairness(state)
    result.fair = result.problem is None
    if leave:
        with contextlib.suppress(ServerError, ConnectionError, TimeoutError):
            await request(client, v1.LeaveTable(table=table), deadline=15.0)
    return result


class _Stalled(Exception):
    pass


async def _progress(
    client: Client, predicate: Callable[[], object], gate: asyncio.Event | None
) -> None:
    """Wait until ``predicate()``; raise :class:`_Stalled` after :data:`STALL` seconds of
    waiting with the gate open. While it is closed the player is told to wait, and that time
    does not count: the clock starts again when it opens (checked every :data:`GATE_POLL` s),
    so a hold longer than the stall is not taken for one a moment after the gate opens."""
    if gate is None:
        try:
            await client.wait_until(predicate, timeout=STALL)
        except TimeoutError:
            raise _Stalled from None
        return
    waited_open = 0.0
    while True:
        try:
            await client.wait_until(predicate, timeout=GATE_POLL)
            return
        except TimeoutError:
            waited_open = waited_open + GATE_POLL if gate.is_set() else 0.0
            if waited_open >= STALL:
                raise _Stalled from None


async def play_tables(
    tables: Sequence[Table],
    *,
    think: float = 0.05,
    deadline: float = 90.0,
    gate: asyncio.Event | None = None,
) -> None:
    """Play every seat of every table to the end; each table's results go to its ``results``."""

    async def one(table: Table) -> None:
        table.results = list(
            await asyncio.gather(
                *(
                    play(
                        client,
                        table.id,
                        strategy=STRATEGIES[i % len(STRATEGIES)],
                        think=think,
                        deadline=deadline,
                        gate=gate,
                    )
                    for i, client in enumerate(table.clients)
                )
            )
        )

    await asyncio.gather(*(one(table) for table in tables))


def frame_marks(clients: Sequence[Client]) -> list[int]:
    """How many frames each client has received so far (see :func:`errors_seen`)."""
    return [len(client.frames or ()) for client in clients]


def errors_seen(clients: Sequence[Client], since: Sequence[int] = ()) -> collections.Counter[str]:
    """Every error code the server sent to these clients, counted (from their frames);
    ``since`` (from :func:`frame_marks`) limits it to the frames received after."""
    decoder = SERVER_DECODERS[1]
    seen: collections.Counter[str] = collections.Counter()
    for index, client in enumerate(clients):
        frames = client.frames or []
        for frame in frames[since[index] if since else 0 :]:
            message = decoder.decode(frame)
            if isinstance(message, v1.Error):
                seen[str(message.code)] += 1
    return seen


@dataclass
class Fault:
    """The moment a fault struck: the tables then mid-game, their event numbers and how many
    frames each of their players had received (what came after is the fault's doing)."""

    at: float
    going: list[Table]
    seqs: dict[str, int]
    frames: dict[str, list[int]]


def mark_fault(tables: Sequence[Table]) -> Fault:
    """Note the tables whose games are in progress now, just before a fault strikes."""
    going = [table for table in tables if not table.over()]
    assert going, "games are in progress when the fault strikes"
    return Fault(
        at=time.monotonic(),
        going=going,
        seqs={table.id: table.seq() for table in going},
        frames={table.id: frame_marks(table.clients) for table in going},
    )


def forbidden_errors(
    tables: Sequence[Table], since: dict[str, list[int]] | None = None
) -> tuple[dict[str, int], list[str]]:
    """The errors of :data:`NEVER` that players of these live tables heard (after the frame
    marks ``since[table]``, if given): counts, and problems to report."""
    seen: collections.Counter[str] = collections.Counter()
    for table in tables:
        marks = since.get(table.id, []) if since else []
        seen.update(errors_seen(table.clients, since=marks))
    found = {code: seen[code] for code in NEVER if seen[code]}
    problems = [
        f"players of live tables were answered {code} {n} times" for code, n in found.items()
    ]
    return found, problems


async def first_event_after(
    tables: Sequence[Table], since: float, marks: dict[str, int], timeout: float
) -> dict[str, float]:
    """Seconds from ``since`` until each table's players held an event past ``marks[table]``.

    Tables that show none within ``timeout`` are left out.
    """
    resumed: dict[str, float] = {}
    end = time.monotonic() + timeout
    while len(resumed) < len(tables) and time.monotonic() < end:
        for table in tables:
            if table.id not in resumed and table.seq() > marks[table.id]:
                resumed[table.id] = time.monotonic() - since
        await asyncio.sleep(0.02)
    return resumed


async def until(predicate: Callable[[], object], timeout: float, period: float = 0.05) -> None:
    """Wait until ``predicate()`` is true, polling; raise ``TimeoutError`` after ``timeout`` s."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(period)


@contextlib.asynccontextmanager
async def abandoned_on_failure(tables: Sequence[Table], playing: asyncio.Task[Any]) -> Any:
    """The body of a scenario while ``playing`` plays ``tables``: if it fails, the play is
    cancelled and every player's client closed before the failure goes on up."""
    try:
        yield
    except BaseException:
        playing.cancel()
        await close_all(clients_of(tables))
        raise


async def close_all(clients: Sequence[Client]) -> None:
    """Close clients for good, whatever state they are in."""
    for client in clients:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(), 5)
