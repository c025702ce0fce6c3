"""Long table logs for tests and benchmarks: a BlackDrez table played game after game, in process.

:func:`play_table` does what a node does for a hosted room, without a node: it runs each command
through :func:`~blackdrez.server.table.commands.execute` on a clock that moves half a second a
command, keeps
the entry only when the room changed, flushes the room's update, and fires its timers when no seat
can act. The players pick random legal actions (seeded), ready up and start again after each game,
so the log grows as long as asked for, through many games."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import msgspec

from blackdrez.protocol import v1
from blackdrez.server.table.commands import (
    NEEDS_SEED,
    Create,
    LogEntry,
    encode_entry,
    execute,
    new_room,
    timer_entry,
)
from blackdrez.server.table.room import Room, RoomError

TABLE = "tlonglog0001"


def play_table(
    entries: int,
    *,
    seats: int = 4,
    seed: int = 0,
    after_each: Callable[[Room, list[bytes]], None] | None = None,
) -> tuple[Room, list[bytes]]:
    """Play a table until its log holds at least ``entries`` entries: the live room and its log.
    ``after_each(room, log)`` is called after every logged command (as a node's log append)."""
    rng = random.Random(seed)
    now = 1_000_000.0
    create = Create(
        table=TABLE,
        game=v1.TABLE_GAME,
        host="p0",
        options=v1.TableOptions(seats=seats, round_pause_seconds=0.0),
        listed=True,
    )
    room = new_room(create, now)
    log = [encode_entry(LogEntry(now=now, command=create))]
    seeds = iter(range(1 << 62))

    def run(entry: LogEntry) -> None:
        version = room.version
        try:
            execute(room, entry)
        except RoomError:
            return
        if room.version != version:
            entry.seq = room.seq
            room.flush()
            room.take_outcome()
            log.append(encode_entry(entry))
            if after_each is not None:
                after_each(room, log)

    def send(player: str, message: Any) -> None:
        nonlocal now
        now += 0.5
        seed_now = f"{seed}:{next(seeds)}" if isinstance(message, NEEDS_SEED) else None
        run(LogEntry(now=now, command=message, player=player, name=player, seed=seed_now))

    players = [f"p{i}" for i in range(seats)]
    for player in players:
        send(player, v1.JoinTable(table=TABLE))
    while len(log) < entries:
        if room.status in ("open", "finished"):
            for player in players:
                send(player, v1.SetReady(table=TABLE))
            send("p0", v1.StartGame(table=TABLE))
            continue
        for seat in room.timers.turn_seats:
            legal = room.legal(seat)
            occupant = room.seats[seat]
            if legal and occupant is not None:
                action = msgspec.to_builtins(rng.choice(legal))
                send(occupant.player, v1.Act(table=TABLE, action=action))
                break
        else:
            deadline = room.next_deadline()
            now = max(now, deadline if deadline is not None else now + 1.0)
            run(timer_entry(room, now))
    return room, log
