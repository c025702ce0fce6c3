"""The work of one action, counted: frames, writes, encodes, store calls and Python calls per
``act``.

Counted, not timed, so the check is exact on any machine: a change that adds a frame, an encode,
a store call or a few function calls to every action fails here and must raise the budget on
purpose (with the benchmarks' figures in ``docs/benchmarks.md`` to show what it costs). The
table: 4 players, each on their own connection, and a spectator, on one node; every figure is per
``act`` over the first 60 actions of seeded games (the harness's seeds), the rounds' and games'
own updates and the restarts between games included (the load tool's bots restart too).
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import blackdrez.games
import blackdrez.protocol
import blackdrez.server
import blackdrez.server.testing
from blackdrez.protocol import codec, v1
from blackdrez.server.testing.node_harness import Cluster, FakeClient, on_nodes
from tests.node.helpers import act_once, phase, seat_and_start

ACTIONS = 60

BUDGET = {
    "frames": 8.84,
    "writes": 7.59,
    "encodes": 5.29,
    "store calls": 1.55,
    "calls": 150.9,
    "loop lookups": 0.0,
}
"""The most of each per action, as measured when this check was written (issue 35): 60 actions
over 3 games (19 rounds) sent 530 frames to the 5 connections (455 updates, 75 replies: each
action's update to every viewer, the rounds' and the games' own updates, the restarts' ready
changes), in 455 writes (an action's update and its ``ok`` share one), with 317 encodes (one
per viewer class and encoding: the seat on turn, everyone else, the spectator's MessagePack;
and each reply) and 91 store calls (the log appends: each carries its lobby change and its
announcement); 92 since a snapshot is taken every 100 entries, not 500 (the one snapshot in
these 91 appends: a table's memory on the node, ``SNAPSHOT_EVERY``), 93 since every 50 (issue
35's memory per connection, 2026-12-04). ``calls``: the Python function calls of the server, the
games and the protocol that the node makes (its interpreter work, which made an action dearer
feature by feature while its frames and store calls stayed put): 239.6 an action at
``649276d``, 156.6 after issue 35's cuts of 2026-12-05 (``docs/benchmarks-log.md``; the same on
every run and hash seed: the harness's clock is virtual), 156.77 since a snapshot reduces the
room and its four parts by a call each (``blackdrez.server.table.parts``: the compiled core's
extension types pickle as the plain classes do), 155.43 since the room's loops over its seats
are the seating's (typed there, compiled: a snapshot reduces the seats and the outcome too, a
call each; the seats' comprehensions are loops); 152.33 since (the budget of 155.5 was left
above it until 2026-12-06: three calls an action could have come back unseen); a newer Python
counts fewer (3.12 inlines comprehensions); 150.88 since an action is served without a
coroutine (``Hosting.act_soon``: no request, routing, execute and append coroutines, no lock
object; the harness serves requests as the session does). Lower it when a change does less;
raise it only on purpose. ``loop lookups``: the node's calls of ``asyncio.get_running_loop``
(on Python 3.11 each is a ``getpid`` system call, the fork check: 1.5-2.3 µs an action in
py-spy's native profiles of 2026-12-06, the node keeping the loop it asked for once instead)."""

_GET_RUNNING_LOOP = asyncio.get_running_loop


_OURS = tuple(
    str(Path(next(iter(package.__path__))).resolve())
    for package in (blackdrez.server, blackdrez.games, blackdrez.protocol)
)
_HARNESS = str(Path(next(iter(blackdrez.server.testing.__path__))).resolve())
_TESTS = str(Path(__file__).resolve().parents[1])
_CLIENT_SIDE = ("FakeClient.", "FakeWebSocket.", "FakeTransport.", "FakeProtocol.", "Seen.")
"""The harness's clients: what they do with what they receive is not the node's work."""


@dataclass
class Counts:
    frames: int = 0
    writes: int = 0
    encodes: int = 0
    store_calls: int = 0
    calls: int = 0
    loop_lookups: int = 0
    """``asyncio.get_running_loop`` called by the node's code."""
    """Calls of the server's, the games' and the protocol's Python functions made by the node (a
    coroutine's or a generator's resumption counts as one): not those the fake clients and the
    test make (decoding what they receive, choosing a move)."""
    by_function: collections.Counter[str] | None = None
    """Those calls by function (``qualname (path:line)``), when asked for (:data:`CALLS_TOP`)."""


CALLS_TOP = int(os.environ.get("BLACKDREZ_CALLS_TOP", "0"))
"""With ``BLACKDREZ_CALLS_TOP=N``, the test also prints the ``N`` functions the node calls most
an action (``pytest -s``): where the calls go, for the next cut (counted: compare two trees by
running it in each)."""


class _CountingEncoder:
    def __init__(self, encoder: Any, counts: Counts) -> None:
        self._encoder = encoder
        self._counts = counts

    def encode(self, message: Any) -> bytes:
        self._counts.encodes += 1
        return self._encoder.encode(message)  # type: ignore[no-any-return]


@contextmanager
def counted(cluster: Cluster, clients: list[FakeClient]) -> Iterator[Counts]:
    """Count what the node does while the block runs."""
    node = cluster.nodes[0]
    counts = Counts(by_function=collections.Counter() if CALLS_TOP else None)
    by_function = counts.by_function
    frames = sum(len(c.received) for c in clients)
    writes = sum(c.ws.transport.writes for c in clients)
    calls = sum(node.store_calls.values())
    saved = codec._msgpack_encoder, codec._json_encoder
    codec._msgpack_encoder = _CountingEncoder(saved[0], counts)  # type: ignore[assignment]
    codec._json_encoder = _CountingEncoder(saved[1], counts)  # type: ignore[assignment]
    kinds: dict[Any, int] = {}

    def kind(frame: FrameType) -> int:
        """The node's code (0), a fake client's or the test's (1), anyone else's (2: asyncio,
        the harness's loop and stores...)."""
        code = frame.f_code
        found = kinds.get(code)
        if found is None:
            real = str(Path(code.co_filename).resolve())
            if real.startswith(_HARNESS):
                found = 1 if code.co_qualname.startswith(_CLIENT_SIDE) else 2
            elif real.startswith(_TESTS):
                found = 1
            else:
                found = 0 if real.startswith(_OURS) else 2
            kinds[code] = found
        return found

    def count_calls(frame: FrameType, event: str, arg: object) -> None:
        if event == "c_call" and arg is _GET_RUNNING_LOOP and kind(frame) == 0:
            counts.loop_lookups += 1
            if by_function is not None:
                where = f"{frame.f_code.co_qualname} ({frame.f_code.co_filename}:{frame.f_lineno})"
                by_function[f"get_running_loop from {where}"] += 1
            return
        if event != "call" or kind(frame) != 0:
            return
        caller = frame.f_back  # the node's work, unless a fake client or the test called it
        while caller is not None and kind(caller) == 0:  # (decoding what it got, its bot)
            caller = caller.f_back
        if caller is None or kind(caller) == 2:
            counts.calls += 1
            if by_function is not None:
                code = frame.f_code
                by_function[f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"] += 1

    previous = sys.getprofile()
    sys.setprofile(count_calls)
    try:
        yield counts
    finally:
        sys.setprofile(previous)
        codec._msgpack_encoder, codec._json_encoder = saved
        counts.frames = sum(len(c.received) for c in clients) - frames
        counts.writes = sum(c.ws.transport.writes for c in clients) - writes
        counts.store_calls = sum(node.store_calls.values()) - calls


@on_nodes(1)
async def test_one_action_costs_no_more_frames_writes_encodes_or_store_calls(
    cluster: Cluster,
) -> None:
    (node,) = cluster.nodes
    players = [await cluster.connect(node, f"P{n}") for n in range(4)]
    spectator = await cluster.connect(node, "Spectator", binary=True)
    table = await seat_and_start(cluster, players[0], players[1:])
    await spectator.ok(v1.Spectate(table=table))
    with counted(cluster, [*players, spectator]) as counts:
        for _ in range(ACTIONS):
            if phase(players[0], table) == "over":
                for player in players:  # counted: the load tool's bots do this too
                    await player.ok(v1.SetReady(table=table))
                await players[0].ok(v1.StartGame(table=table))
            await act_once(cluster, players, table)
    per_action = {
        "frames": counts.frames / ACTIONS,
        "writes": counts.writes / ACTIONS,
        "encodes": counts.encodes / ACTIONS,
        "store calls": counts.store_calls / ACTIONS,
        "calls": counts.calls / ACTIONS,
        "loop lookups": counts.loop_lookups / ACTIONS,
    }
    print(per_action)
    if counts.by_function is not None:
        for name, count in counts.by_function.most_common(CALLS_TOP):
            print(f"{count / ACTIONS:7.2f}  {name}")
    over = {k: round(v, 2) for k, v in per_action.items() if v > BUDGET[k]}
    assert not over, f"per action over the budget {BUDGET}: {over}"
    assert per_action["writes"] < per_action["frames"]  # the actor's frames share a write
