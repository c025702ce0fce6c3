"""Matchmaking across nodes on the virtual clock: ratings far apart wait until the band has
widened to them; the matcher's node killed, another leads and nobody loses their place; a
matcher paused past its lease places nobody when it wakes; a player who cancels while the table
is being made is not placed, nor anyone else of it; the store lost while a table is made loses
nobody's place."""

from __future__ import annotations

from typing import Any

from blackdrez.protocol import v1
from blackdrez.server.matchmaking.pairing import BAND, WIDEN
from blackdrez.server.node.matchmaking import GRACE, KEEP, LEAD_TTL
from blackdrez.server.records.ratings import DISPLAY_BASE, DISPLAY_SCALE
from blackdrez.server.testing.node_harness import Cluster, FakeClient, on_nodes
from tests.node.helpers import play_out


def matched(client: FakeClient) -> v1.MatchFound | None:
    """The ``match_found`` pushed to ``client``, if any."""
    found = [m for m in client.pushed if isinstance(m, v1.MatchFound)]
    return found[-1] if found else None


def rate(cluster: Cluster, shown: dict[str, int]) -> None:
    """Give players the ratings people see (the records read them so)."""
    plain = cluster.records.seat_ratings

    async def seat_ratings(game: str, players: list[str]) -> dict[str, v1.SeatRating]:
        ratings = await plain(game, players)
        for player in players:
            if player in shown:
                ordinal = (shown[player] - DISPLAY_BASE) / DISPLAY_SCALE
                ratings[player] = v1.SeatRating(
                    ordinal=ordinal, mu=25.0, sigma=2.0, games=40, provisional=False
                )
        return ratings

    cluster.records.seat_ratings = seat_ratings  # type: ignore[method-assign]


@on_nodes(2)
async def test_ratings_far_apart_wait_until_the_band_reaches_them(cluster: Cluster) -> None:
    a, b = cluster.nodes
    low, high = await cluster.connect(a, "Low"), await cluster.connect(b, "High")
    gap = 300
    rate(cluster, {low.player: 1500, high.player: 1500 + gap})
    first = await low.ok(v1.FindGame(seats=2, rated=True))
    second = await high.ok(v1.FindGame(seats=2, rated=True))
    assert (first.rating, second.rating) == (1500, 1500 + gap)
    widened_after = (gap - BAND) / WIDEN  # both bands must reach the gap: the later one's
    await cluster.advance(widened_after - 1.0)
    assert matched(low) is None and matched(high) is None, "too far apart yet"
    await cluster.until(lambda: matched(low) and matched(high), "the band widened", within=2.0)
    assert matched(low).table == matched(high).table
    assert matched(low).rated


@on_nodes(2)
async def test_the_matcher_killed_another_leads_and_nobody_loses_their_place(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    ann = await cluster.connect(a, "Ann")
    await ann.ok(v1.FindGame(seats=3))
    await cluster.advance(2.0)
    leader = next(n for n in (a, b) if n.node.matchmaker._token is not None)
    other = b if leader is a else a
    bob = await cluster.connect(other, "Bob")
    asked = await bob.ok(v1.FindGame(seats=3))
    cluster.kill(leader)
    if leader is a:  # Ann's node died with it: she comes back on b, within the keep
        ann = await cluster.reconnect(ann, b)
        again = await ann.ok(v1.FindGame(seats=3))
        assert again.waiting == 2
    await cluster.advance(0.2)  # Cat comes after Bob (the same instant: ordered by id)
    cat = await cluster.connect(other, "Cat")
    await cat.ok(v1.FindGame(seats=3))
    await cluster.until(
        lambda: matched(cat), "the next matcher makes the table", within=LEAD_TTL + 2
    )
    assert matched(cat).players == ["Ann", "Bob", "Cat"], "in the order they first asked"
    assert matched(bob).table == matched(cat).table and asked.waiting == 2


@on_nodes(1)
async def test_a_ticket_nobody_refreshes_is_dropped_after_the_keep(cluster: Cluster) -> None:
    (a,) = cluster.nodes
    ann = await cluster.connect(a, "Ann")
    await ann.ok(v1.FindGame(seats=2))
    await ann.leave()  # gone, not back
    await cluster.advance(KEEP + 1.0)
    bob = await cluster.connect(a, "Bob")
    queued = await bob.ok(v1.FindGame(seats=2))
    assert queued.waiting == 1, "Ann's place went once nobody kept it"
    await cluster.advance(3.0)
    assert matched(bob) is None


@on_nodes(2)
async def test_a_matcher_paused_past_its_lease_places_nobody(cluster: Cluster) -> None:
    a, b = cluster.nodes
    ann = await cluster.connect(b, "Ann")
    await ann.ok(v1.FindGame(seats=3))
    await cluster.advance(1.0)
    leader = next(n for n in (a, b) if n.node.matchmaker._token is not None)
    cluster.pause(leader)
    await cluster.advance(LEAD_TTL + 1.0)
    others = [await cluster.connect(b if leader is a else a, name) for name in ("Bob", "Cat")]
    for client in others:
        await client.ok(v1.FindGame(seats=3))
    await cluster.until(lambda: all(matched(c) for c in others), "made elsewhere", within=3.0)
    cluster.resume(leader)
    await cluster.advance(2.0)
    tables = {matched(c).table for c in others}
    assert len(tables) == 1, "one table: the woken matcher placed nobody again"
    assert leader.node.matchmaker.made == 0


@on_nodes(2)
async def test_the_store_lost_while_a_table_is_made_loses_nobodys_place(cluster: Cluster) -> None:
    """The matcher's store stops answering between two steps of making a table (the first
    player seated, the second not): nobody is told of that table, the tickets stay queued, and
    once the store is back everyone is placed at one table that plays; the half-made table
    frees its seat after the grace."""
    a, b = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(b, "Bob")
    await ann.ok(v1.FindGame(seats=2))
    await cluster.advance(1.0)
    leader = next(n for n in (a, b) if n.node.matchmaker._token is not None)
    hosting = leader.node.matchmaker.hosting
    plain = hosting.execute
    cut: list[str] = []

    async def execute(room: Any, player: str, name: str, step: Any, **kw: Any) -> Any:
        if isinstance(step, v1.JoinTable) and step.seat == 1 and not cut:
            cut.append(step.table)  # the first seat taken; the store goes before the second
            cluster.take_store_down(leader)
        return await plain(room, player, name, step, **kw)

    hosting.execute = execute  # type: ignore[method-assign]
    await bob.ok(v1.FindGame(seats=2))
    await cluster.until(lambda: cut, "a table begun", within=3.0)
    await cluster.advance(3.0)
    assert matched(ann) is None and matched(bob) is None, "nobody told of a half-made table"
    await cluster.bring_store_back(leader)
    await cluster.until(lambda: matched(ann) and matched(bob), "placed", within=LEAD_TTL + 5)
    table = matched(ann).table
    assert matched(bob).table == table != cut[0]
    for player in (ann, bob):
        await player.ok(v1.JoinTable(table=table))
    await play_out(cluster, [ann, bob], table)
    await cluster.advance(GRACE + 5.0)
    half_made = [n.rooms.get(cut[0]) for n in (a, b)]
    assert all(room is None or all(s is None for s in room.seats) for room in half_made)
