"""Daily deals and honest leaderboards over the wire, with the node's clock moved by the test.

A daily deal is the same for everyone, its seed hidden until the UTC day has ended (then it
matches the commitment published all day); ranked play is random deals and a player's first
daily deal of the day, with hints or undos ranked apart; each leaderboard entry's record
verifies (once its day has ended, for a daily deal); numbered deals never rank.
"""

from __future__ import annotations

import datetime
import json

import msgspec
import pytest
import websockets

from blackdrez.clients.client import Client, ServerError
from blackdrez.games.records import decode_record
from blackdrez.games.shuffle import commitment
from blackdrez.games.verify import verify
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.app import GameServer


class Clock:
    """The node's clock, moved by the test (no sleeping)."""

    def __init__(self, text: str) -> None:
        self.now = datetime.datetime.fromisoformat(text).timestamp()

    def __call__(self) -> float:
        return self.now

    def set(self, text: str) -> None:
        self.now = datetime.datetime.fromisoformat(text).timestamp()


@pytest.fixture
def clock(server: GameServer) -> Clock:
    clock = Clock("2026-11-30T10:00:00+00:00")
    server.node.clock.time = clock
    return clock


async def start(client: Client, **fields: object) -> str:
    joined = await client.request(v1.StartSolitaire(game="blue_jacket", **fields))
    table = joined.table.id
    await client.wait_until(lambda: client.tables[table].view is not None)
    return table


async def resign(client: Client, table: str) -> dict:
    await client.act(table, {"type": "resign"})
    state = client.tables[table]
    await client.wait_until(lambda: state.view["over"])
    return state.view


async def refused(client: Client, message: object) -> str:
    with pytest.raises(ServerError) as error:
        await client.request(message)
    return error.value.code


async def test_the_daily_deal_is_the_same_for_all_and_its_seed_hidden_until_the_day_ends(
    server: GameServer, connect, clock: Clock
) -> None:
    ann, bob = await connect(server, name="Ann"), await connect(server, name="Bob")
    daily = await ann.request(v1.GetDaily(game="blue_jacket"))
    assert (daily.day, daily.seed) == ("2026-11-30", None)
    assert daily.ends - daily.starts == 86_400
    tables = [await start(ann, daily=True), await start(bob, daily=True)]
    views = [ann.tables[tables[0]].view, bob.tables[tables[1]].view]
    assert views[0]["rows"] == views[1]["rows"] and views[0]["bottom"] == views[1]["bottom"]
    assert views[0]["commitment"] == daily.commitment
    info = ann.tables[tables[0]].info
    assert info.daily == "2026-11-30" and info.ranked

    view = await resign(ann, tables[0])
    assert view["seed"] is None, "a finished daily game does not show the seed"
    over = [e.event for e in ann.tables[tables[0]].events if e.event["type"] == "game_over"]
    assert over and over[0]["seed"] is None
    assert (await bob.request(v1.GetDaily(game="blue_jacket"))).seed is None
    board = await bob.request(v1.GetLeaderboard(game="blue_jacket", day="2026-11-30"))
    (entry,) = board.entries
    assert (entry.name, entry.deal, entry.day, entry.rank) == ("Ann", "daily", "2026-11-30", 1)
    assert await refused(bob, v1.GetRecord(record=entry.record)) == ErrorCode.SEALED

    clock.set("2026-11-30T23:59:59+00:00")
    assert (await bob.request(v1.GetDaily(game="blue_jacket"))).seed is None
    clock.set("2026-12-01T00:00:00+00:00")
    revealed = await bob.request(v1.GetDaily(game="blue_jacket", day="2026-11-30"))
    assert revealed.seed is not None and commitment(revealed.seed) == daily.commitment
    kept = await bob.request(v1.GetRecord(record=entry.record))
    record = decode_record(kept.text)
    assert record.seed == revealed.seed and verify(record) == []
    today = await bob.request(v1.GetDaily(game="blue_jacket"))
    assert today.day == "2026-12-01" and today.commitment != daily.commitment


async def test_a_future_days_deal_is_not_dealt_yet(server: GameServer, connect, clock) -> None:
    client = await connect(server, name="Eve")
    message = v1.GetDaily(game="blackjack_piles", day="2026-12-01")
    assert await refused(client, message) == ErrorCode.SEALED


async def test_only_the_first_daily_deal_of_the_day_is_ranked(
    server: GameServer, connect, clock: Clock
) -> None:
    ann = await connect(server, name="Ann")
    first = await start(ann, daily=True)
    await resign(ann, first)
    again = await start(ann, daily=True)
    assert not ann.tables[again].info.ranked, "the second try knows the cards already"
    await resign(ann, again)
    numbered = await start(ann, deal=7)
    assert not ann.tables[numbered].info.ranked, "a numbered deal's seed is public"
    await resign(ann, numbered)
    for deal in ("daily", "random"):
        for assisted in (False, True):
            board = await ann.request(
                v1.GetLeaderboard(game="blue_jacket", deal=deal, assisted=assisted)
            )
            expected = ["Ann"] if (deal, assisted) == ("daily", False) else []
            assert [e.name for e in board.entries] == expected


async def test_help_is_ranked_apart_and_every_entry_verifies(
    server: GameServer, connect, clock: Clock
) -> None:
    clean, helped = await connect(server, name="Clean"), await connect(server, name="Helped")
    table = await start(clean)
    assert clean.tables[table].info.ranked and clean.tables[table].info.daily is None
    await resign(clean, table)
    table = await start(helped)
    hint = await helped.request(v1.Hint(table=table))
    assert hint.action in helped.tables[table].legal and hint.hints == 1
    await helped.act(table, hint.action)
    # Undo takes back only what came after the last deal (the hint may have been one): make a
    # move that reveals nothing, dealing until there is one, and take it back.
    state = helped.tables[table]
    while not (moves := [a for a in state.legal if a["type"] in ("move", "interchange")]):
        await helped.act(table, {"type": "deal"})
    await helped.act(table, moves[0])
    await helped.request(v1.Undo(table=table))
    await helped.wait_until(lambda: state.info.undos == 1)
    await resign(helped, table)
    boards = {}
    for assisted in (False, True):
        for day in (None, "2026-11-30"):
            message = v1.GetLeaderboard(
                game="blue_jacket", deal="random", assisted=assisted, day=day
            )
            boards[assisted, day] = (await clean.request(message)).entries
    assert [e.name for e in boards[False, None]] == [e.name for e in boards[False, "2026-11-30"]]
    assert [e.name for e in boards[False, None]] == ["Clean"]
    assert [e.name for e in boards[True, None]] == ["Helped"]
    (entry,) = boards[True, None]
    assert (entry.hints, entry.undos, entry.deal, entry.day) == (1, 1, "random", "2026-11-30")
    for entries in boards.values():
        (entry,) = entries
        kept = await clean.request(v1.GetRecord(record=entry.record))
        assert verify(decode_record(kept.text)) == []
        assert msgspec.json.decode(kept.text)["game"] == "blue_jacket"


async def test_bad_requests_get_typed_errors_and_change_nothing(
    server: GameServer, connect, clock: Clock
) -> None:
    client = await connect(server, name="Bad")
    table = await start(client)
    seq = client.tables[table].seq
    assert await refused(client, v1.Undo(table=table)) == ErrorCode.NOTHING_TO_UNDO
    assert await refused(client, v1.Undo(table="s-none")) == ErrorCode.NOT_FOUND
    assert await refused(client, v1.GetRecord(record="s-none.1")) == ErrorCode.NOT_FOUND
    message = v1.StartSolitaire(game="blue_jacket", daily=True, deal=3)
    assert await refused(client, message) == ErrorCode.BAD_MESSAGE
    await resign(client, table)
    after = client.tables[table].seq
    assert after > seq
    assert await refused(client, v1.Hint(table=table)) == ErrorCode.GAME_OVER
    assert await refused(client, v1.Undo(table=table)) == ErrorCode.GAME_OVER
    await client.request(v1.Ping())
    assert client.tables[table].seq == after
    with pytest.raises(msgspec.ValidationError):  # the server answers bad_message to this
        msgspec.json.decode(
            b'{"type": "daily", "game": "blue_jacket", "day": "30/11/2026"}', type=v1.ClientMessage
        )


async def test_a_daily_session_deals_the_days_deal_once(
    server: GameServer, connect, clock: Clock
) -> None:
    """``start`` in a finished session deals another game; in a daily deal's session it would
    be a new shuffle still marked daily and ranked (a re-roll of the day's deal onto its
    board): refused, and the board keeps the one game."""
    ann = await connect(server, name="Ann")
    table = await start(ann, daily=True)
    await resign(ann, table)
    seq = ann.tables[table].seq
    assert await refused(ann, v1.StartGame(table=table)) == ErrorCode.GAME_OVER
    await ann.request(v1.Ping())
    assert ann.tables[table].seq == seq
    board = await ann.request(v1.GetLeaderboard(game="blue_jacket", deal="daily"))
    assert [e.name for e in board.entries] == ["Ann"]
    again = await start(ann)  # a random deal's session may deal again
    await resign(ann, again)
    await ann.request(v1.StartGame(table=again))


async def test_the_days_deal_is_not_dealt_again_while_its_ranked_game_is_played(
    server: GameServer, connect, clock: Clock
) -> None:
    """A second session of the day's deal shows the same cards: opened beside the ranked one,
    its deals would show the ranked game's stock before it is dealt (then played with
    hindsight, onto the board). It waits until the ranked game has ended; another game's
    daily deal is another deal, and may be played meanwhile."""
    ann = await connect(server, name="Ann")
    ranked = await start(ann, daily=True)
    assert ann.tables[ranked].info.ranked
    message = v1.StartSolitaire(game="blue_jacket", daily=True)
    assert await refused(ann, message) == ErrorCode.GAME_RUNNING
    piles = await ann.request(v1.StartSolitaire(game="blackjack_piles", daily=True))
    assert piles.table.ranked
    await resign(ann, ranked)
    again = await start(ann, daily=True)
    assert not ann.tables[again].info.ranked, "the second try knows the cards already"
    await resign(ann, again)
    board = await ann.request(v1.GetLeaderboard(game="blue_jacket", deal="daily"))
    assert [e.name for e in board.entries] == ["Ann"]


async def test_a_day_no_calendar_has_is_a_bad_message(server: GameServer, clock: Clock) -> None:
    async with websockets.connect(f"ws://127.0.0.1:{server.port}/", compression=None) as ws:
        await ws.send('{"type": "hello", "versions": [1], "name": "Cal"}')
        assert json.loads(await ws.recv())["type"] == "welcome"
        for kind in ("daily", "leaderboard"):
            for day in ("2020-02-30", "2020-13-45", "0000-01-01", "2026-00-00"):
                frame = {"type": kind, "id": 5, "game": "blue_jacket", "day": day}
                await ws.send(json.dumps(frame))
                reply = json.loads(await ws.recv())
                assert (reply["type"], reply["code"]) == ("error", "bad_message"), reply
                assert "calendar" in reply["message"]
        await ws.send('{"type": "ping", "id": 6}')
        assert json.loads(await ws.recv())["type"] == "pong"


async def test_a_past_day_nobody_was_dealt_is_not_dealt_now(
    server: GameServer, connect, clock: Clock
) -> None:
    """Every day's seed is kept for good: a client asking for each past day would make a key
    per day. A day that ended without its deal is answered ``not_found``, and nothing kept;
    a day dealt while it ran shows its seed once it has ended."""
    eve = await connect(server, name="Eve")
    today = await eve.request(v1.GetDaily(game="blackjack_piles"))
    message = v1.GetDaily(game="blackjack_piles", day="2026-11-29")
    assert await refused(eve, message) == ErrorCode.NOT_FOUND
    assert await server.store.daily.seed("blackjack_piles", "2026-11-29", None) is None
    clock.set("2026-12-01T10:00:00+00:00")
    revealed = await eve.request(v1.GetDaily(game="blackjack_piles", day=today.day))
    assert revealed.seed is not None and commitment(revealed.seed) == today.commitment
