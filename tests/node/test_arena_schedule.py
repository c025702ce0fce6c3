"""Arenas on the operator's schedule (issue 37): ``--arena-schedule`` lines parsed or refused
with a reason; each occurrence made by every node an hour ahead under one id (the nodes agree,
nothing is made twice), listed as upcoming, its players paired from its start; the next one
made when its hour comes."""

from __future__ import annotations

import pytest

from blackdrez.protocol import v1
from blackdrez.server.matchmaking.schedule import AHEAD, MAKER, ArenaSchedule, parse_schedule
from blackdrez.server.testing.node_harness import WALL_START, Cluster, FakeClient, on_nodes

DAY = WALL_START - WALL_START % 86400
"""Midnight UTC of the harness's first day (its clock starts at 08:00)."""
HOURLY = parse_schedule("hourly :30 20 seats=2 Half past")


def test_schedule_lines_are_read_as_written() -> None:
    daily = parse_schedule("daily 18:00 60 Daily bot arena")
    assert daily == ArenaSchedule("daily", 18 * 3600, 60, "Daily bot arena", seats=4, rated=False)
    duel = parse_schedule("  hourly :05 15 seats=2 rated  Quick  duel ")
    assert duel == ArenaSchedule("hourly", 300, 15, "Quick  duel", seats=2, rated=True)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("weekly 18:00 60 Sunday", "is not a schedule"),
        ("daily 18:00 Sunday", "is not a schedule"),
        ("daily 18:00 60", "is not a schedule"),
        ("daily :30 60 Name", "a daily arena starts at HH:MM"),
        ("hourly 10:30 20 Name", "an hourly arena starts at :MM"),
        ("daily 24:00 60 Name", "is not a time of day"),
        ("daily 18:60 60 Name", "is not a time of day"),
        ("hourly :30 61 Name", "lasts 1 to 60 minutes, not 61"),
        ("daily 18:00 0 Name", "lasts 1 to 1440 minutes, not 0"),
        ("daily 18:00 60 seats=9 Name", "seats are 2 to 8, not 9"),
        ("daily 18:00 60 " + "n" * 65, "at most 64 characters"),
    ],
)
def test_a_schedule_line_that_cannot_be_read_says_why(line: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_schedule(line)


def test_the_occurrences_running_or_starting_within_the_hour() -> None:
    daily = parse_schedule("daily 18:00 60 Evening")
    assert daily.starts_between(DAY + 16 * 3600, AHEAD) == [], "two hours before: not yet"
    assert daily.starts_between(DAY + 17 * 3600, AHEAD) == [DAY + 18 * 3600]
    assert daily.starts_between(DAY + 18.5 * 3600, AHEAD) == [DAY + 18 * 3600], "running"
    assert daily.starts_between(DAY + 19 * 3600, AHEAD) == [], "over at 19:00"
    assert daily.starts_between(DAY + 23.5 * 3600, AHEAD) == []
    assert HOURLY.starts_between(DAY + 8 * 3600, AHEAD) == [DAY + 8.5 * 3600]
    assert HOURLY.starts_between(DAY + 8.6 * 3600, AHEAD) == [DAY + 8.5 * 3600, DAY + 9.5 * 3600]
    ids = {HOURLY.arena_id(DAY + 8.5 * 3600), HOURLY.arena_id(DAY + 9.5 * 3600)}
    again = parse_schedule("hourly :30 20 seats=2 Half past")  # another node, the same line
    assert len(ids) == 2 and again.arena_id(DAY + 8.5 * 3600) in ids
    other = parse_schedule("hourly :30 20 seats=2 Another name")
    assert other.arena_id(DAY + 8.5 * 3600) not in ids


async def listed(client: FakeClient) -> list[v1.ArenaInfo]:
    return (await client.ok(v1.ListArenas())).arenas


@on_nodes(2, arena_schedule=[HOURLY])
async def test_every_node_makes_the_scheduled_arena_once_and_it_pairs_from_its_start(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(b, "Bob")
    await cluster.advance(1.0)
    [arena] = await listed(ann)
    start = DAY + 8.5 * 3600
    assert arena.id == HOURLY.arena_id(start) and arena.maker == MAKER
    assert (arena.name, arena.seats, arena.status) == ("Half past", 2, "upcoming")
    assert (arena.starts, arena.ends) == (start, start + 20 * 60)
    assert [x.id for x in await listed(bob)] == [arena.id], "the other node made the same"
    for player in (ann, bob):
        await player.ok(v1.JoinArena(arena=arena.id))
    await cluster.advance(start - cluster.clock.time() - 5.0)
    assert not any(isinstance(m, v1.MatchFound) for m in ann.pushed), "not before its start"
    await cluster.advance(10.0)
    await cluster.until(
        lambda: any(isinstance(m, v1.MatchFound) and m.arena == arena.id for m in bob.pushed),
        "paired at its start",
        within=5.0,
    )
    # Past half past, the next hour's is made too (a check a minute); still one of each.
    await cluster.advance(120.0)
    ids = [x.id for x in await listed(ann)]
    assert ids == [arena.id, HOURLY.arena_id(start + 3600)]
    assert [x.id for x in await listed(bob)] == ids
