"""The table core under random commands and random time: it never freezes, never spins, only
takes documented transitions, and its log always rebuilds exactly the live room."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from blackdrez.protocol import v1
from blackdrez.server.table.commands import decode_entry
from blackdrez.server.table.lifecycle import GAME_RUNNING, TRANSITIONS, TableStatus
from blackdrez.server.table.records import players_seated
from blackdrez.server.table.room import RoomError
from tests.server.harness import TableHarness
from tests.server.test_lifecycle import assert_replays

PLAYERS = ["a", "b", "c", "d"]
KINDS = ["join", "leave", "ready", "unready", "start", "drop", "resync", "spectate"]
STEPS = st.lists(
    st.tuples(
        st.sampled_from([*KINDS, "act", "act", "act", "act", "wait", "wait"]),
        st.sampled_from(PLAYERS),
        st.sampled_from([0.0, 0.5, 2.0, 5.0, 15.0, 60.0]),
    ),
    max_size=80,
)
SETUP = [("join", "a", 0.0), ("join", "b", 0.0), ("ready", "b", 0.0), ("start", "a", 0.0)]
"""Every table starts with a game, so that the random steps meet every status."""


def step(harness: TableHarness, kind: str, player: str, seconds: float, rng: random.Random) -> None:
    client = harness.client(player)
    try:
        match kind:
            case "join":
                client.join()
            case "leave":
                client.leave()
            case "ready" | "unready":
                client.ready(kind == "ready")
            case "start":
                harness.client(harness.room.seating.host).start()
            case "act":
                seat = harness.room.seat_of(player)
                legal = harness.room.legal(seat) if seat is not None else []
                client.act(rng.choice(legal) if legal else {"type": "hit"})
            case "drop":
                client.drop()
            case "resync":
                client.resync()
            case "spectate":
                client.spectate()
            case "wait":
                harness.advance(seconds)
    except RoomError:
        pass  # refused: the harness checked that it changed nothing


@settings(max_examples=100, deadline=None)
@given(
    steps=STEPS,
    pause=st.sampled_from([0.0, 2.0]),
    grace=st.sampled_from([0.0, 10.0, 30.0, 120.0]),
    seed=st.integers(0, 10**6),
)
def test_random_tables_never_freeze_or_spin_and_always_replay(
    steps: list[tuple[str, str, float]], pause: float, grace: float, seed: int
) -> None:
    harness = TableHarness(
        host="a",
        seats=3,
        round_pause_seconds=pause,
        grace_seconds=grace,
        turn_seconds=10.0,
        seeds=[f"prop:{seed}:{i}" for i in range(100)],
    )
    rng = random.Random(seed)
    for kind, player, seconds in [*SETUP, *steps]:
        step(harness, kind, player, seconds, rng)  # the harness raises Spinning on a busy loop
        room = harness.room
        if room.status in (TableStatus.BETWEEN_ROUNDS, TableStatus.WAITING):
            assert room.next_deadline() is not None, "a timed status always has its deadline"
        if room.status in GAME_RUNNING:
            assert room.engine is not None and not room.engine.over
        if kind == "wait" and not room.closed:
            deadline = room.next_deadline()
            assert deadline is None or deadline > harness.now, "nothing left due after a wait"
        assert_replays(harness)
    for before, after in harness.transitions:
        assert after in TRANSITIONS[before]
    # with time alone, every table ends up closed: nobody is there to play forever
    for player in PLAYERS:
        if harness.room.seat_of(player) is not None:
            harness.client(player).leave()
    harness.advance(3600.0)
    assert harness.room.closed
    assert_replays(harness)
    # the closing record's lean reading of the log finds whom the whole entries say sat there
    joined = [decode_entry(data) for data in harness.log]
    seated = {entry.player for entry in joined if isinstance(entry.command, v1.JoinTable)}
    assert players_seated(harness.log) == seated
