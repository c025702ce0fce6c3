"""Arenas across nodes on the virtual clock (issue 37): the arena's players are paired with each
other only, into tables of its size marked with it; a finished game scores its players by place
(once, whichever node finishes it), and the standings are pushed to everyone following the arena;
joining again pairs a player again with their points kept; leaving stops the pairing; an ended
arena pairs nobody and scores nothing more; a private arena needs its invite."""

from __future__ import annotations

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.node.arenas import CREATE_BURST
from blackdrez.server.testing.node_harness import Cluster, FakeClient, on_nodes
from tests.node.helpers import act_once, phase, play_out


def matched(client: FakeClient) -> v1.MatchFound | None:
    found = [m for m in client.pushed if isinstance(m, v1.MatchFound)]
    return found[-1] if found else None


def last_standings(client: FakeClient) -> list[v1.StandingInfo] | None:
    pushed = [m for m in client.pushed if isinstance(m, v1.ArenaStandings)]
    return pushed[-1].standings if pushed else None


async def arena_of(client: FakeClient, **options) -> v1.Arena:
    options.setdefault("name", "Evening arena")
    options.setdefault("seats", 2)
    return await client.ok(v1.CreateArena(options=v1.ArenaOptions(**options)))


@on_nodes(2)
async def test_an_arenas_players_play_each_other_and_the_standings_move(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(b, "Bob")
    outsider = await cluster.connect(a, "Out")
    watcher = await cluster.connect(b, "Watcher")
    arena = (await arena_of(ann)).arena
    assert arena.status == "running" and arena.seats == 2
    await outsider.ok(v1.FindGame(seats=2))  # the open queue: never paired with the arena's
    for player in (ann, bob):
        joined = await player.ok(v1.JoinArena(arena=arena.id))
    assert sorted(s.name for s in joined.standings) == ["Ann", "Bob"]
    await watcher.ok(v1.WatchArena(arena=arena.id))
    await cluster.until(lambda: matched(ann) and matched(bob), "paired", within=3.0)
    assert matched(outsider) is None, "an arena's players only with each other"
    table = matched(ann).table
    assert matched(bob).table == table and matched(ann).arena == arena.id
    for player in (ann, bob):
        await player.ok(v1.JoinTable(table=table))
    assert ann.table(table).info.arena == arena.id
    await play_out(cluster, [ann, bob], table)
    await cluster.until(lambda: last_standings(watcher), "standings pushed", within=5.0)
    standings = last_standings(watcher)
    assert [s.games for s in standings] == [1, 1]
    assert [s.points for s in standings] == [1, 0], "the winner beat one player"
    assert standings[0].wins == 1 and standings[0].rank == 1
    # Joining again pairs them again, points kept.
    for player in (ann, bob):
        again = await player.ok(v1.JoinArena(arena=arena.id))
    assert sum(s.points for s in again.standings) == 1
    await cluster.until(lambda: matched(ann).table != table, "paired again", within=3.0)


@on_nodes(1)
async def test_leaving_stops_the_pairing_and_an_ended_arena_pairs_nobody(
    cluster: Cluster,
) -> None:
    (a,) = cluster.nodes
    ann, bob, cat = [await cluster.connect(a, n) for n in ("Ann", "Bob", "Cat")]
    arena = (await arena_of(ann, minutes=1)).arena
    await ann.ok(v1.JoinArena(arena=arena.id))
    await ann.ok(v1.LeaveArena(arena=arena.id))
    await bob.ok(v1.JoinArena(arena=arena.id))
    await cluster.advance(3.0)
    assert matched(ann) is None and matched(bob) is None, "Ann left: Bob waits alone"
    lines = (await cat.ok(v1.WatchArena(arena=arena.id))).standings
    assert {s.name: s.active for s in lines} == {"Ann": False, "Bob": True}
    await cluster.advance(60.0)
    refused = await cat.request(v1.JoinArena(arena=arena.id))
    assert isinstance(refused, v1.Error) and refused.code == ErrorCode.ARENA_OVER
    listed = await cat.ok(v1.ListArenas())
    assert [(x.id, x.status, x.players) for x in listed.arenas] == [(arena.id, "finished", 2)]


@on_nodes(1)
async def test_a_private_arena_needs_its_invite_and_is_not_listed(cluster: Cluster) -> None:
    (a,) = cluster.nodes
    maker, guest = await cluster.connect(a, "Maker"), await cluster.connect(a, "Guest")
    made = await arena_of(maker, private=True)
    assert made.invite
    refused = await guest.request(v1.JoinArena(arena=made.arena.id))
    assert isinstance(refused, v1.Error) and refused.code == ErrorCode.INVITE_REQUIRED
    await guest.ok(v1.JoinArena(arena=made.arena.id, invite=made.invite))
    assert (await guest.ok(v1.ListArenas())).arenas == []
    missing = await guest.request(v1.WatchArena(arena="nope"))
    assert isinstance(missing, v1.Error) and missing.code == ErrorCode.NOT_FOUND


@on_nodes(1)
async def test_a_flood_of_arenas_is_refused_past_a_few(cluster: Cluster) -> None:
    (a,) = cluster.nodes
    maker = await cluster.connect(a, "Maker")
    made = [
        await maker.request(v1.CreateArena(options=v1.ArenaOptions(name=f"A{n}")))
        for n in range(10)
    ]
    refused = [m for m in made if isinstance(m, v1.Error)]
    assert len(made) - len(refused) == CREATE_BURST
    assert all(e.code == ErrorCode.RATE_LIMITED and e.retry_after for e in refused)
    assert len((await maker.ok(v1.ListArenas())).arenas) == CREATE_BURST
    await cluster.advance(61.0)
    await maker.ok(v1.CreateArena(options=v1.ArenaOptions(name="later")))


@on_nodes(1)
async def test_bots_in_an_arena_are_scored_as_players(cluster: Cluster) -> None:
    """A bot arena's bots (``blackdrez arena``) scored nothing: their games were left out."""
    (a,) = cluster.nodes
    maker = await cluster.connect(a, "Maker")
    bots = [await cluster.connect(a, f"Bot {n}", bot=True) for n in range(2)]
    arena = (await arena_of(maker)).arena
    for bot in bots:
        await bot.ok(v1.JoinArena(arena=arena.id))
    await cluster.until(lambda: all(matched(b) for b in bots), "paired", within=3.0)
    table = matched(bots[0]).table
    for bot in bots:
        await bot.ok(v1.JoinTable(table=table))
    await play_out(cluster, bots, table)
    watched = await maker.ok(v1.WatchArena(arena=arena.id))
    await cluster.until(lambda: last_standings(maker) or watched.standings[0].games, "scored")
    lines = last_standings(maker) or watched.standings
    assert [s.games for s in lines] == [1, 1] and all(s.bot for s in lines)


@on_nodes(2)
async def test_leaving_the_arena_mid_game_finishes_that_game_scored_and_pairs_no_more(
    cluster: Cluster,
) -> None:
    """The hostile case "leaving mid-round": a player leaves the arena while their arena game
    is on. The game goes on with them (their seat is theirs until it ends), it is scored for
    everyone, their points stay, and the arena pairs them no more: the others are paired with
    each other."""
    a, b = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(b, "Bob")
    cat = await cluster.connect(b, "Cat")
    arena = (await arena_of(ann)).arena
    for player in (ann, bob):
        await player.ok(v1.JoinArena(arena=arena.id))
    await cluster.until(lambda: matched(ann) and matched(bob), "paired", within=3.0)
    table = matched(ann).table
    for player in (ann, bob):
        await player.ok(v1.JoinTable(table=table))
    for _ in range(3):
        await act_once(cluster, [ann, bob], table)
    assert phase(ann, table) != "over"
    await ann.ok(v1.LeaveArena(arena=arena.id))  # mid-game
    await cat.ok(v1.JoinArena(arena=arena.id))
    await cluster.advance(3.0)
    assert matched(cat) is None, "Bob is still playing, Ann left: Cat waits"
    await play_out(cluster, [ann, bob], table)
    await cluster.until(
        lambda: sum(s.games for s in last_standings(cat) or []) == 2, "scored", within=5.0
    )
    by_name = {s.name: s for s in last_standings(cat) or []}
    assert by_name["Ann"].games == 1 and not by_name["Ann"].active
    assert by_name["Bob"].games == 1 and by_name["Cat"].games == 0
    assert sorted([by_name["Ann"].points, by_name["Bob"].points]) in ([0, 1], [0, 0])
    first_tables = {p.name: matched(p).table for p in (ann, bob)}
    await bob.ok(v1.JoinArena(arena=arena.id))
    await cluster.until(lambda: matched(cat) and matched(bob).table != table, "paired", within=3.0)
    assert matched(cat).table == matched(bob).table
    assert matched(ann).table == first_tables["Ann"], "Ann is paired no more"
