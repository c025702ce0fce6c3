"""Partitions: a node cut from Redis, a client gone silent, the bus lost, a master cut from its
replica, a slow link (issue 33).

Every scenario runs in a lab of Linux network namespaces of its own
(:mod:`blackdrez.server.testing.netns`):
Redis (or each of a Redis Cluster's six processes) and every node in a namespace of its own, all
on one private bridge, addresses in ``10.231.X.0/24``. The players are the test's own clients,
in the root namespace, reaching the nodes through the lab's link as a client machine would. The
faults are iptables ``DROP`` rules (no FIN, no RST: each side's socket stays open and hears
nothing) and ``tc`` token buckets, made inside the namespaces, so that nothing of them outlives
the lab; every lab is deleted in teardown, and a session-start sweep deletes what a crashed run
left. After each scenario, the fault suite's history checker.

It needs root, ``ip``, ``iptables`` and ``tc``: without them the tests are skipped, except under
CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import socket
import statistics
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from blackdrez.clients.bots import BotResult
from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.server.app import Settings
from blackdrez.server.node import LEASE_TTL
from blackdrez.server.node.leases import LEASE_MARGIN
from blackdrez.server.stores.redis_bus import KEEPALIVE as BUS_KEEPALIVE
from blackdrez.server.testing import netns
from blackdrez.server.testing.netns import Lab, NamespacedNode
from blackdrez.server.testing.nodes import CpuSampler, lease_holders
from blackdrez.server.testing.redis_cluster import LocalCluster, direct_client
from blackdrez.server.testing.redis_server import RedisServer
from tests.faults.conftest import _outcome
from tests.faults.history import (
    check_history,
    finish_and_check,
    read_table_logs,
    resume_figures,
    wait_closed,
)
from tests.faults.players import (
    Table,
    abandoned_on_failure,
    act_on_turn,
    clients_of,
    close_all,
    connect,
    errors_seen,
    fault_options,
    first_event_after,
    game_over,
    mark_fault,
    open_table,
    open_tables,
    play,
    play_tables,
    request,
    results_of,
    seat_of,
    until,
)

pytestmark = pytest.mark.timeout(150)

KEEPALIVE = Settings.ping_interval + Settings.ping_timeout + Settings.close_timeout
"""Seconds after which a node lets go of a client whose link went silent (docs/protocol.md):
its next WebSocket ping comes within 20 s, goes unanswered for 20 s, and the close it then
sends waits ``--close-timeout`` (10 s) for an answer before the connection is dropped."""
KEEPALIVE_ROOM = 5.0
"""Seconds allowed past it on this loaded machine."""
HANDOVER_BOUND = 15.0
"""Seconds from a node's cut from Redis until its tables go on elsewhere and its players have
moved: its lease (1 s), the store's grace (3 s), the adopter's scan and the clients' reconnection
backoff, with room for a loaded machine."""
BUS_BOUND = 5.0
"""Seconds within which players hear their table again after their node's bus connection is
killed (it reconnects at once: a reset, not a silence)."""
SILENT_BUS_BOUND = 2 * BUS_KEEPALIVE + 5.0
"""The same when the connection goes silent: the bus reader pings after KEEPALIVE idle seconds
and gives the link up when no reply came by the next; then as above."""


# ---------------------------------------------------------------------------- the lab


@dataclass
class Site:
    """One scenario's deployment: its lab, its store, its nodes."""

    lab: Lab
    store_url: str
    store_hosts: list[netns.Host]
    nodes: list[NamespacedNode] = field(default_factory=list)
    cluster: LocalCluster | None = None

    @property
    def urls(self) -> list[str]:
        """Every node's WebSocket URL."""
        return [node.url for node in self.nodes]

    @property
    def redis(self) -> netns.Host:
        """The host of the one Redis."""
        return self.store_hosts[0]

    def stop(self) -> None:
        """Heal every cut (a node stops faster when it reaches its store), stop the nodes."""
        with contextlib.suppress(RuntimeError):
            self.lab.heal()
        for node in self.nodes:
            node.terminate()
        for node in self.nodes:
            node.stop()


Build = Callable[..., Site]


@pytest.fixture
def build(
    netns_ready: None, tmp_path: Any, cpu: CpuSampler, request: pytest.FixtureRequest
) -> Iterator[Build]:
    """``build(nodes, cluster=False, extra=())``: a lab with a durable Redis (or a Redis
    Cluster of 3 masters and 3 replicas) and node processes, each in a namespace of its own;
    all stopped and deleted after the test, whatever its outcome."""
    sites: list[Site] = []
    with contextlib.ExitStack() as stack:

        def make(nodes: int = 2, *, cluster: bool = False, extra: Sequence[str] = ()) -> Site:
            lab = stack.enter_context(Lab())
            if cluster:
                hosts = [lab.host(f"redis{i}") for i in range(6)]
                store = LocalCluster(hosts=[(host.address, host.wrap) for host in hosts])
                stack.enter_context(store)
                site = Site(lab, store.url, hosts, cluster=store)
            else:
                host = lab.host("redis")
                redis = RedisServer(
                    appendonly=True, data_dir=tmp_path, bind=host.address, wrap=host.wrap
                )
                stack.enter_context(redis)
                site = Site(lab, redis.url, [host])
            stack.callback(site.stop)
            for index in range(nodes):
                host = lab.host(f"node{index}")
                site.nodes.append(NamespacedNode(host, site.store_url, f"node{index}", extra=extra))
            for node in site.nodes:
                node.launch()
            for node in site.nodes:
                node.wait_started()
                cpu.watch(node.node_id, node.pid)
            sites.append(site)
            return site

        yield make
        if request.node.stash.get(_outcome, "passed") != "passed":
            for site in sites:
                for node in site.nodes:
                    tail = node.output()[-40:]
                    print(f"--- last lines of {node.node_id} ---\n" + "".join(tail))


# ---------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class Attempt:
    """One action a player sent, and what came of it."""

    player: str
    table: str
    sent: float
    received: float
    url: str
    """The node whose connection carried the answer (or was lost)."""
    outcome: str
    """``ok``, the error code it was answered, or ``lost`` (no answer: its fate is unknown)."""
    seq: int = 0
    """The acknowledged event number (with ``ok``)."""


def record_attempts(clients: Sequence[Client]) -> list[Attempt]:
    """From now on, note every action these clients send and its outcome (``act`` wrapped)."""
    attempts: list[Attempt] = []
    for client in clients:
        act = client.act

        async def timed(table: str, action: Any, act: Any = act, client: Client = client) -> Any:
            sent = time.monotonic()
            outcome, seq = "lost", 0
            try:
                ok = await act(table, action)
                outcome, seq = "ok", ok.seq
                return ok
            except ServerError as error:
                outcome = str(error.code)
                raise
            finally:
                attempts.append(
                    Attempt(client.player, table, sent, time.monotonic(), client.url, outcome, seq)
                )

        client.act = timed  # type: ignore[method-assign]
    return attempts


def acks_of(attempts: Sequence[Attempt]) -> list[Attempt]:
    """The acknowledged ones."""
    return [a for a in attempts if a.outcome == "ok"]


def ghosts(logs: dict[str, Any], attempts: Sequence[Attempt]) -> list[str]:
    """Actions a table's log holds that their player was never acknowledged, beyond the
    attempts whose answer was lost (those may or may not have been done): each such action was
    answered with an error, which promises that nothing changed."""
    found = []
    for table, log in logs.items():
        for player in {a.player for a in attempts if a.table == table}:
            mine = [a for a in attempts if a.table == table and a.player == player]
            acked = {a.seq for a in mine if a.outcome == "ok"}
            logged = {seq for who, seq in logged_acts(log.entries) if who == player}
            unknown = sum(a.outcome == "lost" for a in mine)
            unacked = sorted(logged - acked)
            if len(unacked) > unknown:
                found.append(
                    f"{table}: {player}'s actions at events {unacked} are logged but were never "
                    f"acknowledged ({unknown} answer(s) lost): answered as not done, done anyway"
                )
    return found


async def unanswered_but_done(
    site: Site, tables: Sequence[Table], attempts: Sequence[Attempt], figures: dict[str, Any]
) -> list[str]:
    """:func:`ghosts` of these tables, counted in the figures."""
    logs = await read_table_logs(site.store_url, [t.id for t in tables])
    found = ghosts(logs, attempts)
    figures["actions done though answered not done"] = len(found)
    return found


def queued_to(host: netns.Host, peer: str) -> list[int]:
    """The local ports of ``host``'s TCP connections to ``peer`` that its processes have closed
    while bytes they sent were still undelivered: orphans the kernel goes on retransmitting, to
    deliver once the link heals (``ss``: FIN-WAIT-1 with a send queue)."""
    ports = []
    for line in host.run(["ss", "-tanH", "dst", peer]).splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0] == "FIN-WAIT-1" and fields[2] != "0":
            ports.append(int(fields[3].rsplit(":", 1)[1]))
    return ports


class Monitor:
    """``MONITOR`` on one Redis while in the context: every command it runs, with the client's
    address and when it was heard (``time.monotonic()``), read by a thread."""

    def __init__(self, redis_url: str) -> None:
        where = urllib.parse.urlsplit(redis_url)
        self.address = (where.hostname or "127.0.0.1", where.port or 6379)
        self.lines: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        with socket.create_connection(self.address, timeout=5) as link:
            link.sendall(b"MONITOR\r\n")
            link.settimeout(0.2)
            buffer = b""
            while not self._stop.is_set():
                try:
                    chunk = link.recv(1 << 16)
                except TimeoutError:
                    continue
                if not chunk:
                    return
                *lines, buffer = (buffer + chunk).split(b"\r\n")
                now = time.monotonic()
                self.lines += [(now, line.decode(errors="replace")[:200]) for line in lines]

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def run_after(self, since: float, address: str, ports: Sequence[int]) -> list[str]:
        """The commands Redis ran after ``since`` for the connections of ``address`` from
        these ports."""
        mine = tuple(f" {address}:{port}]" for port in ports)
        return [line for at, line in self.lines if at > since and any(m in line for m in mine)]


def count_resyncs(clients: Sequence[Client]) -> list[str]:
    """From now on, note every table these clients' library resyncs by itself (a gap)."""
    resyncs: list[str] = []
    for client in clients:
        resync = client._resync_until_done

        async def counted(table: str, resync: Any = resync) -> None:
            resyncs.append(table)
            await resync(table)

        client._resync_until_done = counted  # type: ignore[method-assign]
    return resyncs


def health(node: NamespacedNode) -> str:
    """The status a node's ``/healthz`` gives (``ok``, ``store_unreachable``...)."""
    url = f"http://{node.host.address}:{node.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return str(json.load(answer)["status"])
    except urllib.error.HTTPError as refused:
        return str(json.load(refused)["status"])
    except OSError as error:
        return f"unreachable: {error}"


def latency_figures(figures: dict[str, Any], name: str, acks: Sequence[Attempt]) -> None:
    """Median, 95th percentile and worst acknowledgement time of ``acks``, in ms."""
    times = sorted((ack.received - ack.sent) * 1000 for ack in acks)
    if not times:
        figures[f"{name} act ms"] = "none"
        return
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    figures[f"{name} act ms p50/p95/max (n)"] = (
        f"{statistics.median(times):.0f}/{p95:.0f}/{times[-1]:.0f} ({len(times)})"
    )


def event_type(event: Any) -> str:
    """An event's ``type`` (the client keeps events as decoded maps)."""
    return str(event.get("type") if isinstance(event, dict) else getattr(event, "type", ""))


def first_event(
    client: Client, table: str, after: int, kind: str, seat: int, **fields: Any
) -> int | None:
    """The number of the first event of ``kind`` about ``seat`` after event ``after``."""
    for numbered in client.tables[table].events:
        event = numbered.event
        if numbered.seq <= after or event_type(event) != kind or event.get("seat") != seat:
            continue
        if all(event.get(key) == value for key, value in fields.items()):
            return numbered.seq
    return None


async def heard_again(
    clients: dict[Client, str], marks: dict[Client, int], since: float, timeout: float
) -> dict[Client, float]:
    """Seconds from ``since`` until each client held an event of its table past its mark."""
    heard: dict[Client, float] = {}
    end = time.monotonic() + timeout
    while len(heard) < len(clients) and time.monotonic() < end:
        for client, table in clients.items():
            if client not in heard and client.tables[table].seq > marks[client]:
                heard[client] = time.monotonic() - since
        await asyncio.sleep(0.02)
    return heard


async def holders(site: Site) -> dict[str, str]:
    """The node holding each leased table."""
    return await asyncio.to_thread(lease_holders, site.store_url)


def logged_acts(entries: Sequence[Any]) -> set[tuple[str, int]]:
    """(player, event number) of every action a table's log holds."""
    return {(e.player, e.seq) for e in entries if isinstance(e.command, v1.Act)}


# ---------------------------------------------------------------------------- 1. node | Redis


async def test_a_node_cut_from_redis_hands_its_tables_and_players_over(
    build: Build, cpu: CpuSampler, figures: dict[str, Any]
) -> None:
    """Two nodes, four tables; node 0 is cut from Redis (every packet dropped both ways) while
    its players' connections stay up. It must acknowledge nothing once its leases can have
    lapsed; its tables go on at node 1, and its players move there (their client library
    reconnects to the other URL), with nothing lost. Then the link heals: node 0 must write
    nothing stale (no command it sent into the cut and gave up on may reach Redis afterwards),
    and hold a table it then hosts (no adoption)."""
    site = build(2)
    node0 = site.nodes[0]
    tables = await open_tables(site.urls, 4, fault_options())
    attempts = record_attempts(clients_of(tables))
    playing = asyncio.create_task(play_tables(tables, think=0.1))
    extra: list[Table] = []
    problems: list[str] = []
    with Monitor(site.store_url) as monitor:
        async with abandoned_on_failure(tables, playing):
            await asyncio.sleep(1.0)
            hosted = {t for t, node in (await holders(site)).items() if node == node0.node_id}
            fault = mark_fault([t for t in tables if t.id in hosted])
            stranded = [c for c in clients_of(tables) if c.url == node0.url]
            cut = site.lab.cut(node0.host, site.redis.address)
            cut_at = fault.at
            resumed = await first_event_after(fault.going, cut_at, fault.seqs, HANDOVER_BOUND)
            resume_figures(figures, resumed, len(fault.going))
            with contextlib.suppress(TimeoutError):
                await until(
                    lambda: all(c.reconnected_at > cut_at and c.url != node0.url for c in stranded),
                    max(0.0, HANDOVER_BOUND - (time.monotonic() - cut_at)),
                )
            moved = [c.reconnected_at - cut_at for c in stranded if c.reconnected_at > cut_at]
            figures["players moved"] = f"{len(moved)}/{len(stranded)}"
            if moved:
                figures["players moved s max"] = round(max(moved), 2)
            # The cut lasts a little past the handover: the cut node must say it is cut off.
            said = collections.Counter()
            while time.monotonic() - cut_at < HANDOVER_BOUND - 2 or not said:
                said[await asyncio.to_thread(health, node0)] += 1
                await asyncio.sleep(0.25)
            figures["cut node's /healthz after the moves"] = dict(said)
            orphans = await asyncio.to_thread(queued_to, node0.host, site.redis.address)
            figures["closed connections to Redis with bytes undelivered at the heal"] = len(orphans)
            site.lab.heal(cut)
            healed_at = time.monotonic()
            figures["cut s"] = round(healed_at - cut_at, 2)
            await until(lambda: health(node0) == "ok", 15)
            figures["cut node ok again s after the heal"] = round(time.monotonic() - healed_at, 2)
            extra = [await open_table(site.urls, fault_options(), host_url=node0.url)]
            playing_extra = asyncio.create_task(play_tables(extra, think=0.1))

        async def both() -> None:
            await asyncio.gather(playing, playing_extra)

        problems += await finish_and_check(
            site.store_url,
            tables + extra,
            asyncio.create_task(both()),
            fault,
            figures,
            cpu=cpu,
            nodes=site.nodes,
        )
    stale = monitor.run_after(healed_at, node0.host.address, orphans)
    figures["commands of closed connections run after the heal"] = len(stale)
    problems += [f"run after the heal, sent into the cut: {command}" for command in stale]
    trusted_until = cut_at + LEASE_TTL * (1 - LEASE_MARGIN)
    late = [
        a
        for a in acks_of(attempts)
        if a.url == node0.url and cut_at < a.sent and a.received < healed_at
    ]
    figures["acks by the cut node for actions sent in the cut"] = len(late)
    problems += [
        f"node 0 acknowledged {a.table}'s event {a.seq} {a.received - cut_at:.2f} s into its cut"
        for a in late
        if a.received > trusted_until
    ]
    problems += await unanswered_but_done(site, tables + extra, attempts, figures)
    logs = await read_table_logs(site.store_url, [extra[0].id])
    resumes = sum(type(e.command).__name__ == "Resume" for e in logs[extra[0].id].entries)
    figures["adoptions of the table node 0 hosts after the heal"] = resumes
    if resumes:
        problems.append(f"the table node 0 hosted after the heal was adopted {resumes} times")
    if len(resumed) < len(fault.going):
        problems.append(f"{len(fault.going) - len(resumed)} table(s) of the cut node stalled")
    if set(said) != {"store_unreachable"}:
        problems.append(f"the cut node's /healthz said {dict(said)} in the cut, after the moves")
    if len(moved) < len(stranded):
        problems.append(
            f"{len(stranded) - len(moved)} of {len(stranded)} players of the cut node did not "
            f"move to another node within {HANDOVER_BOUND} s"
        )
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------- 2. client silent


async def test_a_client_whose_link_goes_silent_is_let_go_by_the_keepalive(
    build: Build, cpu: CpuSampler, figures: dict[str, Any]
) -> None:
    """Two players at a table of one node; Bob's link goes silent (his address cut from the
    node both ways: no FIN, no RST), so the node's socket stays open. The node must find it by
    its WebSocket keepalive (docs/protocol.md: a ping every 20 s; unanswered within 20 s, the
    connection is closed, let go at most ``--close-timeout`` later) and count Bob away, then
    free his seat after the table's grace (2 s here); then Ann plays the game to its end. Turns
    last 60 s and Ann waits until Bob is counted away, so that nothing but the keepalive can
    let him go."""
    site = build(1)
    node = site.nodes[0]
    silent = site.lab.client_address()
    options = fault_options(seats=2, max_rounds=3, turn_seconds=60.0, grace_seconds=2.0)
    ann = await connect(node.url, name="Ann")
    bob = await connect(node.url, name="Bob", reconnect=False, local_addr=(silent, 0))
    attempts = record_attempts([ann, bob])
    try:
        table = (await request(ann, v1.CreateTable(options=options))).table.id
        await request(bob, v1.JoinTable(table=table))
        for client in (ann, bob):
            await request(client, v1.SetReady(table=table))
        await request(ann, v1.StartGame(table=table))
        for client in (ann, bob):
            await client.wait_until(lambda c=client: c.tables[table].view is not None, 30)
        for _ in range(2):
            await act_on_turn([ann, bob], table)
        seat = seat_of(bob, table)
        mark = ann.tables[table].seq
        site.lab.cut(node.host, silent)
        cut_at = time.monotonic()
        limit = KEEPALIVE + KEEPALIVE_ROOM
        with contextlib.suppress(TimeoutError):
            await ann.wait_until(
                lambda: first_event(ann, table, mark, "presence", seat, connected=False), limit
            )
        away = first_event(ann, table, mark, "presence", seat, connected=False)
        away_s = time.monotonic() - cut_at
        figures["away after s"] = round(away_s, 2) if away else f"not within {limit:.0f}"
        closes = await asyncio.to_thread(closes_counted, node)
        figures["keepalive closes (1011)"] = closes.get("1011", 0)
        # Ann stays at the table when the game ends: a game that ends within Bob's grace frees
        # his seat at the finished table, after she would have left (seen once in CI)
        playing = asyncio.create_task(play(ann, table, think=0.1, deadline=60, leave=False))
        freed = None
        if away:
            with contextlib.suppress(TimeoutError):
                await ann.wait_until(lambda: first_event(ann, table, away, "seat_freed", seat), 30)
            freed = first_event(ann, table, away, "seat_freed", seat)
            figures["seat freed after s"] = (
                round(time.monotonic() - cut_at, 2) if freed else "not within 30 s after"
            )
        result = await playing
        with contextlib.suppress(ServerError, ConnectionError, TimeoutError):
            await request(ann, v1.LeaveTable(table=table), deadline=15.0)
    finally:
        await close_all([ann, bob])
    await wait_closed(site.store_url, [table])
    bobs = [a.seq for a in acks_of(attempts) if a.player == bob.player]
    bob_result = BotResult(table=table, seat=seat, player=bob.player, acked=bobs)
    history = await check_history(site.store_url, [result], cpu=cpu, nodes=site.nodes)
    figures.update(history.figures)
    lost = await check_history(site.store_url, [bob_result], finished=False, closed=False)
    figures["Bob's acks, lost"] = f"{lost.figures['acked']}, {lost.figures['lost']}"
    problems = history.problems + lost.problems
    if not away:
        problems.append(f"Bob was not counted away within {limit:.0f} s of his link's silence")
    elif not freed:
        problems.append("Bob's seat was not freed after he was counted away")
    assert not problems, "\n".join(problems)


def closes_counted(node: NamespacedNode) -> dict[str, int]:
    """``blackdrez_closes_total`` of a node, by close code."""
    url = f"http://{node.host.address}:{node.port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith("blackdrez_closes_total{"):
            code = line.split('code="', 1)[1].split('"', 1)[0]
            found[code] = int(float(line.rsplit(" ", 1)[1]))
    return found


# ---------------------------------------------------------------------------- 3. the bus


@pytest.mark.parametrize("how", ["killed", "silent"])
async def test_a_node_whose_bus_connection_is_lost_keeps_its_players_in_step(
    how: str, build: Build, cpu: CpuSampler, figures: dict[str, Any]
) -> None:
    """Two nodes, four tables; node 1's pub/sub connection to Redis is lost while its commands
    still pass: ``killed`` (``CLIENT KILL`` on Redis: a reset it hears at once) or ``silent``
    (that one connection's packets dropped both ways). Its players at tables hosted by node 0
    hear those tables through it: they must hear them again (the node reconnects, resubscribes
    and catches up), with nothing lost."""
    site = build(2)
    node0, node1 = site.nodes
    tables = await open_tables(site.urls, 4, fault_options())
    attempts = record_attempts(clients_of(tables))
    resyncs = count_resyncs(clients_of(tables))
    playing = asyncio.create_task(play_tables(tables, think=0.1))
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        hosted = {t for t, node in (await holders(site)).items() if node == node0.node_id}
        fault = mark_fault(tables)
        # (a game may have ended before the cut: its players have nothing more to hear)
        listening = {
            c: t.id for t in fault.going if t.id in hosted for c in t.clients if c.url == node1.url
        }
        assert listening, "node 1 serves players of games going at tables hosted by node 0"
        figures["games over before the cut"] = len(tables) - len(fault.going)
        marks = {c: c.tables[t].seq for c, t in listening.items()}
        ports = await asyncio.to_thread(pubsub_ports, site, node1)
        assert len(ports) == 1, f"node 1 has one pub/sub connection: {ports}"
        port = ports[0]
        if how == "killed":
            await asyncio.to_thread(kill_client, site, node1.host.address, port)
        else:
            site.lab.cut(node1.host, site.redis.address, local_port=port)
        bound = BUS_BOUND if how == "killed" else SILENT_BUS_BOUND
        heard = await heard_again(listening, marks, fault.at, bound + 5)
        if heard:
            figures["heard again s max"] = round(max(heard.values()), 2)
            figures["heard again s median"] = round(statistics.median(heard.values()), 2)
        figures["players heard again"] = f"{len(heard)}/{len(listening)}"
        figures["players not heard again"] = [
            describe_listener(c, t, marks[c], tables)
            for c, t in listening.items()
            if c not in heard
        ]
        fault_end = time.monotonic()
        commands = [
            a for a in acks_of(attempts) if a.url == node1.url and fault.at < a.sent < fault_end
        ]
        figures["acks through node 1 meanwhile"] = len(commands)
        with contextlib.suppress(TimeoutError):
            await until_replaced(site, node1, port, bound + 5)
        figures["bus connection replaced after s"] = round(time.monotonic() - fault.at, 2)
    problems = await finish_and_check(
        site.store_url, tables, playing, fault, figures, cpu=cpu, nodes=site.nodes
    )
    figures["client resyncs"] = len(resyncs)
    problems += await unanswered_but_done(site, tables, attempts, figures)
    late = {c: s for c, s in heard.items() if s > bound}
    if len(heard) < len(listening) or late:
        problems.append(
            f"{len(listening) - len(heard)} player(s) never heard their table again, "
            f"{len(late)} after more than {bound:.0f} s"
        )
    assert not problems, "\n".join(problems)


def describe_listener(client: Client, table: str, mark: int, tables: Sequence[Table]) -> str:
    """What a player who did not hear their table again holds, for the failure's report."""
    state = client.tables[table]
    held = max(t.seq() for t in tables if t.id == table)
    return (
        f"{client.player} at {table}: via {client.url}, reconnects {client.reconnects}, "
        f"closed {client.closed.done()}, event {state.seq} (marked {mark}; its table's players "
        f"hold {held}), legal {len(state.legal)}, game over {game_over(client, table)}"
    )


def pubsub_ports(site: Site, node: NamespacedNode) -> list[int]:
    """The local ports of ``node``'s pub/sub connections to Redis (``CLIENT LIST TYPE
    pubsub``): none while it reconnects, two while Redis still holds a silent one."""
    with direct_client(site.store_url) as client:
        return [
            int(connection["addr"].rpartition(":")[2])
            for connection in client.client_list(_type="pubsub")
            if connection["addr"].rpartition(":")[0] == node.host.address
        ]


async def until_replaced(site: Site, node: NamespacedNode, port: int, timeout: float) -> None:
    """Wait until ``node`` has a pub/sub connection other than the one at ``port``."""
    async with asyncio.timeout(timeout):
        while all(p == port for p in await asyncio.to_thread(pubsub_ports, site, node)):
            await asyncio.sleep(0.25)


def kill_client(site: Site, address: str, port: int) -> None:
    """``CLIENT KILL ADDR address:port`` on the Redis."""
    with direct_client(site.store_url) as client:
        client.execute_command("CLIENT", "KILL", "ADDR", f"{address}:{port}")


# ---------------------------------------------------------------------------- 4. master | replica


@pytest.mark.parametrize("wait", [0, 1])
async def test_a_master_cut_from_its_replica_then_killed(
    wait: int, build: Build, cpu: CpuSampler, figures: dict[str, Any]
) -> None:
    """A Redis Cluster of 3 masters and 3 replicas, each process in a namespace of its own; two
    nodes, six tables. The master of most tables is cut from its replica (every packet dropped
    both ways: the replication stream and their cluster bus; the other masters still see both),
    play goes on for two seconds, then the master is SIGKILLed: its replica takes over with
    whatever it had before the cut. Without ``--redis-wait-replicas`` what the master
    acknowledged in the cut is lost (measured: figures); with ``--redis-wait-replicas 1`` the
    nodes answer ``unavailable`` in the cut instead, and nothing acknowledged is lost."""
    extra = ("--redis-wait-replicas", "1", "--redis-wait-timeout-ms", "200") if wait else ()
    site = build(2, cluster=True, extra=extra)
    cluster = site.cluster
    assert cluster is not None
    tables = await open_tables(site.urls, 6, fault_options())
    attempts = record_attempts(clients_of(tables))
    playing = asyncio.create_task(play_tables(tables, think=0.1, deadline=60))
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        victim, hit = await asyncio.to_thread(busiest_master, cluster, tables)
        replica = await asyncio.to_thread(cluster.replica_of, victim)
        fault = mark_fault(hit)
        cut = site.lab.cut(site.store_hosts[victim], site.store_hosts[replica].address)
        await asyncio.sleep(2.0)
        cluster.kill(victim)
        killed_at = time.monotonic()
        await asyncio.to_thread(cluster.wait_promoted)
        figures["replica promoted s after the kill"] = round(time.monotonic() - killed_at, 2)
        # Healed only now: the replication stream the killed master's kernel still held would
        # reach the replica before its promotion, which a dead machine's would not.
        site.lab.heal(cut)
        await asyncio.to_thread(cluster.restart, victim)  # WAIT needs a replica again
        await asyncio.to_thread(cluster.wait_healthy)
    hit_ids = {t.id for t in hit}
    in_cut = [
        a for a in acks_of(attempts) if a.table in hit_ids and fault.at <= a.received <= killed_at
    ]
    figures["acks at the cut master's tables in the cut"] = len(in_cut)
    refused = sum(  # (a game of those tables may have ended before the cut: not marked)
        (errors_seen(t.clients, since=fault.frames[t.id]) for t in fault.going),
        collections.Counter(),
    )
    try:
        await asyncio.wait_for(playing, 90)
    finally:
        await close_all(clients_of(tables))
    await wait_closed(site.store_url, [t.id for t in tables], timeout=20)
    # With WAIT, a table is adopted once, after the failover (its lease was on the dead master);
    # without, the loss of what its host had logged may move it more.
    history = await check_history(
        site.store_url, results_of(tables), resumes=1 if wait else None, cpu=cpu, nodes=site.nodes
    )
    figures.update(history.figures)
    lost: list[Attempt] = []
    for ack in acks_of(attempts):
        log = history.logs.get(ack.table)
        if log is not None and (ack.player, ack.seq) not in logged_acts(log.entries):
            lost.append(ack)
    figures["lost acknowledged in the cut"] = sum(a in in_cut for a in lost)
    figures["lost acknowledged before the cut"] = sum(a.received < fault.at for a in lost)
    figures["unavailable answers at the cut master's tables"] = refused["unavailable"]
    if wait:
        history.assert_sound()
        return
    # Without WAIT: only what the master acknowledged in the cut may be lost.
    problems = [
        f"{a.table}: event {a.seq}, acknowledged before the cut, is lost"
        for a in lost
        if a not in in_cut
    ]
    assert not problems, "\n".join(problems)


def busiest_master(cluster: LocalCluster, tables: list[Table]) -> tuple[int, list[Table]]:
    """The master serving the most of ``tables`` (by their keys' slot), and those tables."""
    served: dict[int, list[Table]] = {}
    for table in tables:
        served.setdefault(cluster.index_serving(f"bd:t:{{{table.id}}}:log"), []).append(table)
    index = max(served, key=lambda i: len(served[i]))
    return index, served[index]


# ---------------------------------------------------------------------------- 5. slow link


async def test_a_slow_link_between_a_node_and_redis(
    build: Build, cpu: CpuSampler, figures: dict[str, Any]
) -> None:
    """Two nodes, four tables; node 0's traffic with Redis (both ways, nothing else) goes
    through a 256 kbit/s token bucket (``tc ... tbf``, a queue of at most 100 ms) after the
    first second of play. Every game finishes with nothing lost; action latency is reported
    for the tables node 0 hosts and those node 1 hosts, before and under the shaping."""
    site = build(2)
    node0, node1 = site.nodes
    tables = await open_tables(site.urls, 4, fault_options())
    attempts = record_attempts(clients_of(tables))
    playing = asyncio.create_task(play_tables(tables, think=0.1))
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        hosted = await holders(site)
        fault = mark_fault(tables)
        site.lab.shape(node0.host, site.redis.address, "256kbit", latency="100ms")
        shaped_at = time.monotonic()
    problems = await finish_and_check(
        site.store_url, tables, playing, fault, figures, cpu=cpu, nodes=site.nodes
    )
    for node in (node0, node1):
        mine = {t for t, holder in hosted.items() if holder == node.node_id}
        before = [a for a in acks_of(attempts) if a.table in mine and a.sent < shaped_at]
        under = [a for a in acks_of(attempts) if a.table in mine and a.sent >= shaped_at]
        latency_figures(figures, f"{node.node_id}'s tables before", before)
        latency_figures(figures, f"{node.node_id}'s tables shaped", under)
    problems += await unanswered_but_done(site, tables, attempts, figures)
    assert not problems, "\n".join(problems)
