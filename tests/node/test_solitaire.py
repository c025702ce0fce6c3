"""Solitaire sessions on a node: hints from the expert (inline here), undo, a resigned ranked
game on the leaderboards with its record, its par found after the end; a rated table's
ratings read from the records."""

from __future__ import annotations

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.node.hosting import HINT_BURST
from blackdrez.server.testing.node_harness import Cluster, on_nodes


@on_nodes(2)
async def test_a_resigned_ranked_session_goes_on_the_leaderboards_with_its_record(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    player = await cluster.connect(a, "Solo")
    table = (await player.ok(v1.StartSolitaire(game="blackjack_piles"))).table.id
    await cluster.settle()
    await player.ok(v1.Act(table=table, action={"type": "resign"}))
    await cluster.until(lambda: "game_over" in player.table(table).event_types(), "game over")
    await cluster.until(lambda: a.rooms[table].par_wanted is None, "the par is logged")
    other = await cluster.connect(b, "Reader")
    board = await other.ok(v1.GetLeaderboard(game="blackjack_piles", deal="random"))
    (entry,) = board.entries
    assert entry.player == player.player and entry.rank == 1
    record = await other.ok(v1.GetRecord(record=entry.record))
    assert record.text  # the game's record, kept with its board entry
    assert cluster.records.games  # and the game went to the records


@on_nodes(1)
async def test_hints_are_the_experts_and_rate_limited_and_undo_takes_a_move_back(
    cluster: Cluster,
) -> None:
    (a,) = cluster.nodes
    player = await cluster.connect(a, "Solo")
    table = (await player.ok(v1.StartSolitaire(game="blackjack_piles", deal=3))).table.id
    await cluster.settle()
    hinted = await player.ok(v1.Hint(table=table))
    assert hinted.action in player.table(table).legal and hinted.by == "expert"
    await player.ok(v1.Act(table=table, action=hinted.action))
    assert a.rooms[table].info().hints == 1  # logged with the move it was for
    refusals = []
    for _ in range(HINT_BURST + 1):
        reply = await player.request(v1.Hint(table=table))
        if isinstance(reply, v1.Error):
            refusals.append(reply.code)
    assert ErrorCode.RATE_LIMITED in refusals
    legal = player.table(table).legal
    await player.ok(v1.Act(table=table, action=legal[0]))
    undone = await player.request(v1.Undo(table=table))
    assert not isinstance(undone, v1.Error) or undone.code == ErrorCode.NOTHING_TO_UNDO
    not_mine = await (await cluster.connect(a, "Other")).request(v1.Hint(table=table))
    assert isinstance(not_mine, v1.Error)


@on_nodes(2)
async def test_a_rated_table_shows_its_players_ratings_and_retries_a_failed_read(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(b, "Guest")
    table = (await host.ok(v1.CreateTable(options=v1.TableOptions(rated=True)))).table.id

    def ratings() -> list[v1.SeatRating | None]:
        return [seat.rating if seat else None for seat in a.rooms[table].info().seats]

    await cluster.until(lambda: ratings()[0] is not None, "the host's rating")
    cluster.records.failing = True
    await guest.ok(v1.JoinTable(table=table))
    await cluster.advance(1.0)
    assert ratings()[1] is None  # the records database is down
    reads = cluster.records.reads
    cluster.records.failing = False
    await cluster.until(lambda: ratings()[1] is not None, "read once it is back")
    assert cluster.records.reads > reads
    info = guest.table(table).info
    assert info is not None and (seat := info.seats[1]) is not None and seat.rating is not None
