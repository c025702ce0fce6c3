"""Faults of the node processes: killed mid-game, paused past the lease, restarted with its id.

Every scenario runs real ``serve`` processes on a Redis of its own with players over real
sockets, then hands what the players saw to the history checker (:mod:`tests.faults.history`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import msgspec
import pytest

from blackdrez.clients.client import Client, ServerError, TableState
from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS
from blackdrez.server.node import LEASE_TTL
from blackdrez.server.table.commands import LogEntry, Resume, decode_entry, encode_entry, rebuilding
from blackdrez.server.testing.nodes import CpuSampler, lease_holders
from tests.faults.conftest import LaunchNodes, watch_again
from tests.faults.history import (
    check_history,
    finish_and_check,
    resume_figures,
    wait_closed,
)
from tests.faults.players import (
    STRATEGIES,
    abandoned_on_failure,
    act_on_turn,
    close_all,
    connect,
    fault_options,
    first_event_after,
    frame_marks,
    mark_fault,
    next_move,
    open_table,
    open_tables,
    play,
    play_tables,
    request,
    until,
)
from tests.server.harness import TableHarness
from tests.server.helpers import Listener

pytestmark = pytest.mark.timeout(180)


async def test_a_node_killed_mid_game_loses_nothing(
    launch_nodes: LaunchNodes,
    store_url: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """Two nodes, four tables; node 0 is killed mid-game. Its tables go on at node 1 and every
    game ends with nothing acknowledged lost or doubled."""
    nodes = launch_nodes(2)
    tables = await open_tables(nodes.urls, 4, fault_options())
    playing = asyncio.create_task(play_tables(tables, think=0.1))
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        # node 0 hosts the tables whose host sat down there
        fault = mark_fault(tables[0::2])
        nodes[0].kill()
        resumed = await first_event_after(fault.going, fault.at, fault.seqs, timeout=30)
        resume_figures(figures, resumed, len(fault.going))
    problems = await finish_and_check(
        store_url, tables, playing, fault, figures, cpu=cpu, nodes=[nodes[1]]
    )
    if len(resumed) < len(fault.going):
        problems.append(f"{len(fault.going) - len(resumed)} table(s) of the killed node stalled")
    assert not problems, "\n".join(problems)


async def test_a_node_that_stalls_300_ms_keeps_every_table(
    launch_nodes: LaunchNodes,
    store_url: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """A stall shorter than the lease allows (a long garbage collection, a VM pause: here
    SIGSTOP for 300 ms, then SIGCONT) is no failover: no table of the stalled node is adopted by
    another one, and every game goes on to its end with nothing lost. (The same test with a
    1.5 s stall fails: the tables move.)"""
    nodes = launch_nodes(2)
    tables = await open_tables(nodes.urls, 4, fault_options())
    playing = asyncio.create_task(play_tables(tables, think=0.1))
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        hosted = {t for t, node in lease_holders(store_url).items() if node == "node0"}
        assert hosted, "node 0 hosts some tables"
        fault = mark_fault(tables)
        nodes[0].pause()
        await asyncio.sleep(0.3)
        nodes[0].resume()
        figures["stalled s"] = round(time.monotonic() - fault.at, 2)
        await asyncio.sleep(2 * LEASE_TTL + 1.0)  # past any lease the stall could have cost
        adopted = [
            line
            for line in nodes[1].lines_between(fault.at, time.monotonic())
            if "adopted table" in line and any(table in line for table in hosted)
        ]
        figures["tables of the stalled node adopted elsewhere"] = len(adopted)
    problems = await finish_and_check(
        store_url, tables, playing, fault, figures, cpu=cpu, nodes=list(nodes)
    )
    if adopted:
        problems.append(f"a 300 ms stall moved tables: {adopted}")
    assert not problems, "\n".join(problems)


class Suspect(msgspec.Struct, frozen=True):
    """A view of a table older than the adopter's, received from the paused node after it ran
    again (see :func:`stale_views`)."""

    seq: int
    player: str
    view: bytes
    """The view, as JSON."""
    answered: bool
    """It answered a request (a broadcast otherwise)."""


def stale_views(
    clients: list[Client],
    since: list[int],
    table: str,
    fresh: int,
    witnesses: list[Client] | None = None,
) -> list[Suspect]:
    """The snapshots and updates of ``table`` older than ``fresh`` that these clients received
    after ``since`` (from :func:`frame_marks`), except those that are the adopter's own
    history: the same view the same player's client on the adopter (its ``witnesses``, by
    position) received at that event (a node that lost the table follows it and catches its
    clients up, in order, with what the adopter logged). What is left is judged against the
    log by :func:`served_stale`."""
    decoder = SERVER_DECODERS[1]
    seen: list[dict[int, bytes]] = []
    for witness in witnesses or []:
        views: dict[int, bytes] = {}
        for frame in witness.frames or []:
            message = decoder.decode(frame)
            if isinstance(message, v1.Snapshot | v1.Update) and message.table == table:
                views[message.seq] = msgspec.json.encode(message.view)
        seen.append(views)
    suspects = []
    for index, (client, first) in enumerate(zip(clients, since, strict=True)):
        history = seen[index] if index < len(seen) else {}
        for frame in (client.frames or [])[first:]:
            message = decoder.decode(frame)
            if (
                not isinstance(message, v1.Snapshot | v1.Update)
                or message.table != table
                or message.seq >= fresh
            ):
                continue
            view = msgspec.json.encode(message.view)
            if history.get(message.seq) != view:
                suspects.append(Suspect(message.seq, client.player, view, message.id is not None))
    return suspects


def served_stale(suspects: list[Suspect], raw_log: list[bytes]) -> list[int]:
    """The event numbers of the ``suspects`` that are stale: every answer to a request, and
    every broadcast that is not the table as its log has it at that event, for that player,
    before its first adoption. A broadcast that is (the update of an event logged before the
    pause, to a player whose frame the node had queued but not written when it stopped,
    written once it runs again) is the table's true history arriving late, in order, not a
    stale copy served. (After the adoption the paused node logged nothing: a broadcast of a
    later event from it is a fork, even one whose game view happens to be the log's.)"""
    logged: dict[tuple[int, str], bytes] = {}
    for data, room in zip(raw_log, rebuilding(raw_log), strict=True):
        if isinstance(decode_entry(data).command, Resume):
            break
        for seat, taken in enumerate(room.seats):
            if taken is not None:
                logged[room.seq, taken.player] = msgspec.json.encode(room.view(seat))
    return [
        suspect.seq
        for suspect in suspects
        if suspect.answered or logged.get((suspect.seq, suspect.player)) != suspect.view
    ]


def test_a_late_update_of_a_logged_event_is_history_and_any_other_older_view_is_stale() -> None:
    """The paused-node test's check (:func:`served_stale`), against a played log: an update the
    log holds, as the log has it for that player, arriving late is history; the same view
    answering a request, or shown to a player the log had not seated, or an earlier view under
    that event's number, is stale."""
    harness = TableHarness(host="ann", seats=2)
    players = [harness.client("ann"), harness.client("bob")]
    for client in players:
        client.join()
    for client in players:
        client.ready()
    players[0].start()
    for _ in range(2):
        harness.advance(5.0)  # (the deal)
        mover = next(client for client in players if client.legal)
        mover.act(mover.legal[0])
    room = harness.room
    ann = players[0].player
    now = msgspec.json.encode(room.view(room.seat_of(ann)))
    started = next(
        msgspec.json.encode(replayed.view(replayed.seat_of(ann)))
        for replayed in rebuilding(harness.log)
        if replayed.engine is not None
    )
    assert now != started
    seq = room.seq

    def judged(view: bytes, *, answered: bool = False, player: str = ann) -> list[int]:
        return served_stale([Suspect(seq, player, view, answered)], harness.log)

    assert judged(now) == [], "the log's own update, late, is history"
    assert judged(now, answered=True) == [seq], "an answer older than the adopter's is stale"
    assert judged(now, player="carl") == [seq], "no view of the log's is a stranger's"
    assert judged(started) == [seq], "an earlier view under a later event number is stale"
    # adopted: the adopter's own events, with the same game view
    harness.log.append(encode_entry(LogEntry(now=harness.now, command=Resume())))
    adopted = harness.replayed()
    assert adopted.seq > seq
    assert msgspec.json.encode(adopted.view(adopted.seat_of(ann))) == now
    forked = Suspect(adopted.seq, ann, now, answered=False)
    assert served_stale([forked], harness.log) == [forked.seq], "the adopter's events are not A's"


@pytest.mark.parametrize("adopter", ["running", "paused"])
async def test_a_node_paused_past_its_lease_never_serves_or_writes_a_stale_table(
    adopter: str,
    launch_nodes: LaunchNodes,
    store_url: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """Node A hosts a table; A pauses past its lease; B adopts the table and acknowledges two
    actions. Then A resumes, either while B runs or (the split brain of issue 9) while B is
    paused past its own lease. Requests sent to A while it was paused, and a new client's,
    must never see the table as A last knew it, nor be acknowledged on top of it; B's actions
    stay in the log, the log replays, and the game is played to its end."""
    nodes = launch_nodes(2)
    node_a, node_b = nodes[0], nodes[1]
    options = fault_options(seats=2, turn_seconds=300.0, grace_seconds=300.0)
    on_a = [await connect(node_a.url, name=f"P{i}", reconnect=False) for i in range(2)]
    on_b: list[Client] = []
    clients = list(on_a)
    try:
        joined = await on_a[0].request(v1.CreateTable(options=options))
        table = joined.table.id
        await on_a[1].request(v1.JoinTable(table=table))
        for client in on_a:
            await client.request(v1.SetReady(table=table))
        await on_a[0].request(v1.StartGame(table=table))
        for _ in range(3):
            await act_on_turn(on_a, table)
        # A is settled: someone is on turn (a round is never left half-dealt by the pause)
        await until(lambda: any(next_move(c, table) for c in on_a), 30)
        seq_a = max(c.tables[table].seq for c in on_a)

        node_a.pause()
        paused = time.monotonic()
        on_b = [await connect(node_b.url, token=c.token, name=f"P{i}") for i, c in enumerate(on_a)]
        clients += on_b
        for client in on_b:  # answered once B has adopted the table
            client.tables[table] = TableState(table)
            await request(client, v1.Resync(table=table, since=0), deadline=60.0)
        figures["adopted after s"] = round(time.monotonic() - paused, 2)
        assert min(c.tables[table].seq for c in on_b) >= seq_a
        acked: dict[str, list[int]] = {c.player: [] for c in on_b}
        for _ in range(2):
            mover, seq = await act_on_turn(on_b, table)
            acked[mover.player].append(seq)
        seq_b = max(c.tables[table].seq for c in on_b)
        figures["events on A, on B"] = f"{seq_a}, {seq_b}"

        if adopter == "paused":
            node_b.pause()
            await asyncio.sleep(LEASE_TTL + 1.5)  # B's lease lapses too
        marks = frame_marks(on_a)
        # Sent while A is paused: A reads them the moment it runs again.
        resync = asyncio.create_task(on_a[0].request(v1.Resync(table=table, since=0), 60))
        stale_mover = next(c for c in on_a if next_move(c, table) is not None)
        stale_act = asyncio.create_task(stale_mover.act(table, next_move(stale_mover, table)))
        node_a.resume()
        answers = await asyncio.gather(resync, stale_act, return_exceptions=True)
        figures["A answered"] = [type(a).__name__ for a in answers]
        acked_by_a = answers[1].seq if isinstance(answers[1], v1.Ok) else None
        if acked_by_a is not None:
            acked[stale_mover.player].append(acked_by_a)
        await asyncio.sleep(LEASE_TTL + 1.0)  # long enough for A to renew or retake a lease
        newcomer = await connect(node_a.url, token=on_a[1].token, name="P1", reconnect=False)
        clients.append(newcomer)
        newcomer.tables[table] = TableState(table)
        with contextlib.suppress(ServerError, TimeoutError, ConnectionError):
            await request(newcomer, v1.Resync(table=table, since=0), deadline=15.0)
        suspects = stale_views([*on_a, newcomer], [*marks, 0], table, seq_b, [*on_b, on_b[1]])
        stale_ack = acked_by_a is not None and acked_by_a <= seq_b
        figures["stale acks"] = int(stale_ack)

        node_b.resume()
        for client in on_a:
            await client.close()
        # One connection per player: the newcomer on A replaced P1's on B (if B was live to
        # hear it). P1 plays on from a connection on B again, which replaces the newcomer.
        again = await connect(node_b.url, token=on_a[1].token, name="P1")
        clients.append(again)
        again.tables[table] = TableState(table)
        await request(again, v1.Resync(table=table, since=0), deadline=60.0)
        on_b[1] = again
        results = await asyncio.gather(
            *(
                play(client, table, deadline=30.0, strategy=STRATEGIES[i])
                for i, client in enumerate(on_b)
            )
        )
    finally:
        await close_all(clients)
    for result in results:
        result.acked[:0] = acked[result.player]
    await wait_closed(store_url, [table])
    # B adopts; with B paused too, A or B takes the table back once more
    history = await check_history(store_url, results, resumes=2, cpu=cpu, nodes=nodes)
    figures.update(history.figures)
    stale = served_stale(suspects, history.logs[table].raw)
    figures["stale views served"] = len(stale)
    figures["late updates of events logged before the pause"] = len(suspects) - len(stale)
    if stale:
        history.problems.append(f"A served the table at events {stale}, older than B's {seq_b}")
    if stale_ack:
        history.problems.append(f"A acknowledged an action at event {acked_by_a} on a stale copy")
    history.assert_sound()


async def test_a_node_restarted_with_its_id_carries_on_its_tables(
    launch_nodes: LaunchNodes,
    store_url: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """One node, killed and started again at once with the same id: its tables go on at once,
    and no client is ever told that a table of its own does not exist. (Its clients reconnect
    while it starts, answered 503 until it is ready: they must keep trying, see
    ``tests/server/test_reconnect.py``.)"""
    nodes = launch_nodes(1)
    node = nodes[0]
    tables = await open_tables(nodes.urls, 3, fault_options())
    playing = asyncio.create_task(play_tables(tables, think=0.1))
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        fault = mark_fault(tables)
        await asyncio.to_thread(node.restart)
        watch_again(cpu, node)
        resumed = await first_event_after(fault.going, fault.at, fault.seqs, timeout=15)
        resume_figures(figures, resumed, len(fault.going))
    problems = await finish_and_check(
        store_url, tables, playing, fault, figures, cpu=cpu, nodes=nodes
    )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("store_url", ["redis"], indirect=True)  # a cluster's tables never go quiet
@pytest.mark.parametrize("when", ["at once", "once announced"])
async def test_a_spectator_whose_node_pauses_as_it_asks_for_a_quiet_table_misses_nothing(
    launch_nodes: LaunchNodes,
    store_url: str,
    when: str,
    figures: dict[str, Any],
) -> None:
    """Node A hosts a table that no other node follows, so A has stopped announcing its updates
    (a quiet table, ``blackdrez.server.node.hosting``). A spectator asks node B for it, and B is
    frozen
    (SIGSTOP for 1 s) while the game plays on at A: ``at once`` after the request is sent (B
    has most likely not read it: A goes on unheard), or ``once announced``, as soon as A's
    updates are published again (B subscribed, then asked, and A's next updates wait in B's
    socket). Either way, once B runs again the spectator gets the table and every later update
    in order, with no gap for its client to fill by a resync; a table left quiet after B asked
    would send it nothing more."""
    nodes = launch_nodes(2)
    url_a, url_b = nodes.urls
    table = await open_table([url_a], fault_options(seats=2, max_rounds=20))  # outlasts the pause
    listener = Listener(store_url, table.id)
    spectator = await connect(url_b, name="Watcher")
    resyncs: list[str] = []
    resync = spectator._resync_until_done

    async def counted(table_id: str) -> None:
        resyncs.append(table_id)
        await resync(table_id)

    spectator._resync_until_done = counted  # type: ignore[method-assign]
    playing: list[asyncio.Task[Any]] = []
    try:
        await listener.start()
        await act_on_turn(table.clients, table.id)
        await asyncio.sleep(0.3)
        assert listener.heard == [], "the table was not quiet before the spectator came"
        playing = [
            asyncio.create_task(play(client, table.id, think=0.1, leave=False))
            for client in table.clients
        ]
        asking = asyncio.create_task(request(spectator, v1.Spectate(table=table.id)))
        if when == "once announced":
            await until(lambda: listener.heard, 10, period=0.001)
        heard_before = len(listener.heard)
        nodes[1].pause()
        await asyncio.sleep(1.0)
        announced_while_paused = len(listener.heard) - heard_before
        nodes[1].resume()
        resumed = time.monotonic()
        await asking
        results = await asyncio.gather(*playing)
        assert all(r.final is not None for r in results), [r.problem for r in results]
        final = max(c.tables[table.id].seq for c in table.clients)
        state = spectator.tables[table.id]
        await spectator.wait_until(lambda: state.seq >= final, 15)
        figures["spectator at the game's end, s after the resume"] = round(
            time.monotonic() - resumed, 2
        )
    finally:
        for task in playing:
            task.cancel()
        await listener.stop()
        await close_all([*table.clients, spectator])
    figures["updates announced while B was paused"] = announced_while_paused
    figures["spectator's resyncs"] = len(resyncs)
    seqs = [event.seq for event in state.events]
    assert seqs, "the game went on after the spectator's answer"
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), "every event once, in order"
    assert state.view is not None and state.view["phase"] == "over"
    if when == "once announced":
        assert announced_while_paused > 0, "A stopped announcing while B, subscribed, was paused"
    assert resyncs == [], "the spectator's client had to fill a gap"


async def seated_and_watching_through(hosting: str, via: str) -> tuple[str, list[Client]]:
    """A table hosted on the node at ``hosting``: its host, Pat seated and Sam spectating
    through the node at ``via``."""
    host = await Client.connect(hosting, name="Host", binary=True)
    pat = await Client.connect(via, name="Pat", binary=True)
    sam = await Client.connect(via, name="Sam", binary=True)
    options = v1.TableOptions(seats=3, grace_seconds=1.0)
    table = (await host.request(v1.CreateTable(options=options))).table.id
    await pat.request(v1.JoinTable(table=table))
    await sam.request(v1.Spectate(table=table))
    await host.wait_until(lambda: host.tables[table].info.spectators == 1, 10)
    return table, [host, pat, sam]


def let_go_at(host: Client, table: str) -> bool:
    """Whether the host sees Pat's seat freed and Sam gone."""
    info = host.tables[table].info
    return info.spectators == 0 and info.seats[1] is None


async def test_viewers_of_a_killed_node_are_let_go_by_the_tables_host(
    launch_nodes: LaunchNodes, figures: dict[str, Any]
) -> None:
    """A table hosted on node 0; a player sits and a spectator watches through node 1, which
    is killed: nothing tells the host that their connections are gone. The host must count
    the player away (seat freed after the grace) and let the spectator go, from node 1's
    heartbeat stopping; before, the seat stayed held, the spectator counted and the table
    listed for ever."""
    nodes = launch_nodes(2)
    table, (host, pat, sam) = await seated_and_watching_through(nodes.urls[0], nodes.urls[1])
    try:
        nodes[1].kill()
        killed = time.monotonic()

        await host.wait_until(lambda: let_go_at(host, table), 20)
        figures["seat freed after the kill, s"] = round(time.monotonic() - killed, 2)
        assert host.tables[table].info.seats[0] is not None
    finally:
        for client in (host, pat, sam):
            with contextlib.suppress(Exception):
                await client.close()


async def test_viewers_of_a_node_restarted_under_its_id_are_let_go_by_the_tables_host(
    launch_nodes: LaunchNodes, figures: dict[str, Any]
) -> None:
    """As above, but node 1 is killed and started again at once under the same id and port
    (a supervisor with ``--node-id``), within the heartbeat TTL (30 s here), so its id never
    stops heartbeating: only its process changed. The host must let the old process's player
    and spectator go from the new process's incarnation, long before the TTL would lapse;
    before, the seat stayed held and the spectator counted for ever."""
    ttl = 30.0
    nodes = launch_nodes(2, extra=["--lease-ttl", str(ttl)])
    table, (host, pat, sam) = await seated_and_watching_through(nodes.urls[0], nodes.urls[1])
    try:
        killed = time.monotonic()
        await asyncio.to_thread(nodes[1].restart)

        patience = ttl * 2 / 3 - (time.monotonic() - killed)
        await host.wait_until(lambda: let_go_at(host, table), patience)
        figures["seat freed after the restart, s"] = round(time.monotonic() - killed, 2)
        assert host.tables[table].info.seats[0] is not None
    finally:
        for client in (host, pat, sam):
            with contextlib.suppress(Exception):
                await client.close()
