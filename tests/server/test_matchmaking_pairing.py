"""The matchmaker's pure core (issue 37): tables of close ratings, a band that widens with the
wait, the oldest served first, bots after a while; and properties over random queues (nobody
placed twice, every table as its players asked, nobody left waiting once bands are unlimited)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from blackdrez.server.matchmaking.pairing import (
    ANYONE_AFTER,
    BAND,
    PATIENT,
    WIDEN,
    Match,
    Ticket,
    pair,
    suits,
)


def ticket(player: str, rating: float, since: float = 0.0, **kw) -> Ticket:
    kw.setdefault("seats", 4)
    kw.setdefault("rated", True)
    return Ticket(player=player, rating=rating, since=since, **kw)


def test_four_close_players_make_a_table_and_a_far_one_waits() -> None:
    queue = [ticket(p, r) for p, r in (("a", 1500), ("b", 1520), ("c", 1480), ("d", 1550))]
    queue.append(ticket("far", 1900))
    assert pair(queue, now=0.0) == [Match(("a", "b", "c", "d"), 4, True)]


def test_the_band_widens_with_the_wait_until_anyone_will_do() -> None:
    a, b = ticket("a", 1500, seats=2), ticket("b", 1500 + BAND + 10 * WIDEN, seats=2)
    assert pair([a, b], now=5.0) == [], "10 s of widening are needed"
    assert pair([a, b], now=10.0) == [Match(("a", "b"), 2, True)]
    newcomer = ticket("new", 2900, since=PATIENT - 1.0, seats=2)
    far = ticket("far", 1500, since=PATIENT - 2.0, seats=2)
    assert pair([far, newcomer], now=PATIENT) == [], "a fresh ticket's band protects it too"
    old = ticket("old", 2900, seats=2)
    assert pair([a, old], now=ANYONE_AFTER) == [Match(("a", "old"), 2, True)]


def test_once_patient_the_longer_waits_band_decides() -> None:
    """A newcomer at 1500 among regulars rated 1700 to 2000 who queue again at once after each
    game (their bands stay narrow) was never placed; past PATIENT, the newcomer's band decides."""
    newcomer = ticket("new", 1500, since=0.0)
    regulars = [ticket(f"r{n}", 1800 + 10 * n, since=PATIENT - 0.5) for n in range(3)]
    assert pair([newcomer, *regulars], now=PATIENT - 0.1) == [], "mutual bands at first"
    gap = 1830 - 1500
    when = max(PATIENT, (gap - BAND) / WIDEN)
    assert pair([newcomer, *regulars], now=when) == [Match(("new", "r0", "r1", "r2"), 4, True)]


def test_rated_and_casual_and_table_sizes_never_mix() -> None:
    queue = [
        ticket("r1", 1500, seats=2),
        ticket("c1", 1500, seats=2, rated=False),
        ticket("r3", 1500, seats=3),
    ]
    assert pair(queue, now=1000.0) == []
    queue.append(ticket("any", 1500, since=1.0, seats=None))
    assert pair(queue, now=1000.0) == [Match(("r1", "any"), 2, True)]


def test_an_arenas_players_are_paired_only_with_each_other() -> None:
    queue = [ticket("a", 1500, seats=2, pool="arena"), ticket("b", 1500, seats=2)]
    assert pair(queue, now=1000.0) == []
    queue.append(ticket("c", 1500, since=1.0, seats=2, pool="arena"))
    assert pair(queue, now=1000.0) == [Match(("a", "c"), 2, True)]


def test_the_oldest_ticket_is_served_first_with_the_nearest_ratings() -> None:
    queue = [ticket("young", 1500, since=5.0, seats=2), ticket("old", 1510, since=0.0, seats=2)]
    queue.append(ticket("near", 1505, since=3.0, seats=2))
    assert pair(queue, now=6.0) == [Match(("old", "near"), 2, True)]


def test_any_size_prefers_four_then_the_most_players() -> None:
    queue = [ticket(f"p{n}", 1500 + n, seats=None) for n in range(6)]
    assert [m.seats for m in pair(queue, now=0.0)] == [4, 2]
    assert pair(queue[:3], now=0.0) == [Match(("p0", "p1", "p2"), 3, True)]


def test_bots_fill_the_seats_after_the_wait_the_ticket_allows() -> None:
    alone = ticket("alone", 1500, bots_after=20.0)
    friend = ticket("friend", 1530, since=2.0)
    assert pair([alone, friend], now=19.0) == []
    assert pair([alone, friend], now=20.0) == [Match(("alone", "friend"), 4, True, bots=2)]
    assert pair([ticket("solo", 1500, seats=None, bots_after=0.0)], now=0.0) == [
        Match(("solo",), 4, True, bots=3)
    ]


tickets = st.lists(
    st.builds(
        Ticket,
        player=st.sampled_from([f"p{n}" for n in range(40)]),
        rating=st.floats(100, 3000),
        seats=st.one_of(st.none(), st.integers(2, 8)),
        rated=st.booleans(),
        since=st.floats(0, 120),
        bots_after=st.one_of(st.none(), st.floats(0, 60)),
        pool=st.sampled_from(["", "arena-1"]),
    ),
    max_size=40,
    unique_by=lambda t: t.player,
)


@settings(max_examples=300, deadline=None)
@given(queue=tickets, now=st.floats(0, 240))
def test_every_table_is_as_its_players_asked(queue: list[Ticket], now: float) -> None:
    by_player = {t.player: t for t in queue}
    placed: list[str] = []
    for match in pair(queue, now):
        members = [by_player[p] for p in match.players]
        placed.extend(match.players)
        assert len(members) + match.bots == match.seats and 2 <= match.seats <= 8
        assert all(m.rated == match.rated for m in members)
        assert len({m.pool for m in members}) == 1, "an arena's players only with each other"
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                assert suits(a, b, match.seats, now), (a, b)
        if match.bots:
            assert any(m.bots_after is not None and now - m.since >= m.bots_after for m in members)
        else:
            assert all(suits(members[0], m, match.seats, now) for m in members[1:])
    assert len(placed) == len(set(placed)), "nobody is placed twice"


@settings(max_examples=200, deadline=None)
@given(queue=tickets)
def test_once_every_band_is_unlimited_nobody_who_could_be_placed_waits(
    queue: list[Ticket],
) -> None:
    """Past ANYONE_AFTER, a ticket left waiting has, for each size it accepts, fewer players
    waiting who accept that size (and its rated or casual) than the size needs."""
    now = 120 + ANYONE_AFTER
    placed = {p for match in pair(queue, now) for p in match.players}
    left = [t for t in queue if t.player not in placed]
    for t in left:
        for size in t.sizes():
            takers = [
                u for u in left if u.rated == t.rated and u.pool == t.pool and size in u.sizes()
            ]
            assert len(takers) < size, (t, size, takers)
