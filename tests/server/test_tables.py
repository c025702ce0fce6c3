"""BlackDrez tables end to end over real sockets: lobby, seats, games, visibility, permissions."""

from __future__ import annotations

import asyncio
import collections

import msgspec
import pytest

from blackdrez.clients.bots import dealt_cards
from blackdrez.clients.client import ServerError
from blackdrez.games import GAMES, shuffle
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.games.cards import pokerdrez_deck
from blackdrez.games.records import Record
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from tests.server.helpers import game_over, play_out, seat_and_start


@pytest.mark.parametrize("players", [2, 4])
async def test_complete_games_between_clients(server, connect, players: int) -> None:
    clients = [await connect(server, name=f"P{i}", binary=i % 2 == 1) for i in range(players)]
    table = await seat_and_start(clients[0], clients[1:])
    await asyncio.gather(*(play_out(c, table) for c in clients))
    views = [c.tables[table].view for c in clients]
    assert all(v == views[0] for v in views), "every player ends with the same public view"
    final = views[0]
    assert final["phase"] == "over"
    total = sum(len(s["pile"]) for s in final["seats"]) + len(final["set_aside"])
    assert total + final["stock"] == len(pokerdrez_deck(final["decks"]))
    # The revealed seed matches the commitment published at the start and re-deals the game.
    started = next(
        e.event for e in clients[0].tables[table].events if e.event["type"] == "game_started"
    )
    assert started["commitment"] == shuffle.commitment(final["seed"])
    dealt = dealt_cards(clients[0].tables[table].events)
    config = blackdrez.Config(seats=players)
    assert dealt == blackdrez.BlackDrez.deal_order(config, final["seed"])[0][: len(dealt)]


async def test_the_game_replays_exactly_from_seed_and_actions(server, connect) -> None:
    a, b, c = [await connect(server, name=n) for n in "ABC"]
    table = await seat_and_start(a, [b, c])
    await asyncio.gather(*(play_out(x, table, "bust_probability") for x in (a, b, c)))
    final = a.tables[table].view
    room_record = _record_from_events(a.tables[table].events, final["seed"], seats=3)
    engine = blackdrez.BlackDrez.new(blackdrez.Config(**room_record.config), room_record.seed)
    for seat, action in room_record.actions:
        engine.apply(seat, msgspec.convert(action, blackdrez.Action))
    assert msgspec.to_builtins(engine.view(None)) == final


def _record_from_events(events, seed: str, seats: int) -> Record:
    """Rebuild the action list from what any viewer saw: system starts, hits, withdraws, stands."""
    actions: list[tuple[int, dict]] = []
    for numbered in events:
        event = numbered.event
        kind = event["type"]
        if kind == "round_started":
            actions.append((blackdrez.SYSTEM, {"type": "start_round", "seats": event["seats"]}))
        elif kind == "hit":
            actions.append((event["seat"], {"type": "hit"}))
        elif kind == "withdrew":
            actions.append((event["seat"], {"type": "withdraw"}))
        elif kind == "stood":
            actions.append((event["seat"], {"type": "stand"}))
    return Record(game="blackdrez", config={"seats": seats}, seed=seed, actions=actions)


async def test_nobody_ever_receives_an_undealt_card_or_the_seed_early(server, connect) -> None:
    players = [await connect(server, name=f"P{i}", record=True) for i in range(3)]
    watcher = await connect(server, name="Watcher", record=True)
    table = await seat_and_start(players[0], players[1:])
    await watcher.request(v1.Spectate(table=table))
    await asyncio.gather(*(play_out(c, table) for c in players))
    await watcher.wait_until(lambda: game_over(watcher, table))
    seed = players[0].tables[table].view["seed"]
    order = blackdrez.BlackDrez.deal_order(blackdrez.Config(seats=3), seed)[0]
    for client in [*players, watcher]:
        assert client.frames
        for frame in client.frames:
            message = msgspec.json.decode(frame)
            view = message.get("view") if isinstance(message, dict) else None
            if message.get("type") not in ("update", "snapshot") or view is None:
                continue
            drawn = len(order) - view["stock"]
            allowed = collections.Counter(order[:drawn])
            for part in [view, *message.get("events", [])]:
                visible = collections.Counter(_all_cards(part))
                assert not visible - allowed, f"hidden card leaked: {visible - allowed}"
            if view["phase"] != "over":
                assert seed not in frame


def _all_cards(value) -> list[str]:
    """Every card-shaped string anywhere in a decoded message."""
    found = []
    if isinstance(value, dict):
        for item in value.values():
            found += _all_cards(item)
    elif isinstance(value, list):
        for item in value:
            found += _all_cards(item)
    elif (
        isinstance(value, str)
        and len(value) == 2
        and value[0] in "QRBNPJ"
        and value[1] in "123456789"
    ):
        found.append(value)
    return found


async def test_a_connection_acts_only_for_its_own_seat(server, connect) -> None:
    a, b, outsider = [await connect(server, name=n) for n in ("A", "B", "Outsider")]
    table = await seat_and_start(a, [b])
    state = a.tables[table]
    on_turn, waiting = (a, b) if state.view["to_act"] == state.seat else (b, a)
    seq = on_turn.tables[table].seq
    with pytest.raises(ServerError) as error:
        await waiting.act(table, {"type": "hit"})
    assert error.value.code == ErrorCode.NOT_YOUR_TURN
    with pytest.raises(ServerError) as error:
        await outsider.act(table, {"type": "hit"})
    assert error.value.code == ErrorCode.NOT_SEATED
    await outsider.request(v1.Spectate(table=table))
    with pytest.raises(ServerError) as error:
        await outsider.act(table, {"type": "withdraw"})
    assert error.value.code == ErrorCode.NOT_SEATED
    with pytest.raises(ServerError) as error:
        await on_turn.act(table, {"type": "start_round", "seats": [0, 1]})
    assert error.value.code in (ErrorCode.NOT_YOUR_TURN, ErrorCode.ILLEGAL_ACTION)
    with pytest.raises(ServerError) as error:
        await on_turn.act(table, {"type": "fold"})
    assert error.value.code == ErrorCode.BAD_ACTION
    assert on_turn.tables[table].seq == seq, "rejected actions change nothing"
    assert (await on_turn.act(table, {"type": "withdraw"})).seq > seq


async def test_lobby_watchers_see_tables_appear_fill_and_vanish(server, connect) -> None:
    watcher = await connect(server, name="Watcher")
    tables = await watcher.request(v1.WatchLobby())
    assert tables.tables == []
    host = await connect(server, name="Host")
    joined = await host.request(v1.CreateTable(options=v1.TableOptions(name="Friday", seats=3)))
    table = joined.table.id
    await watcher.wait_until(lambda: table in watcher.lobby)
    assert watcher.lobby[table].name == "Friday"
    guest = await connect(server, name="Guest")
    await guest.request(v1.JoinTable(table=table))
    await watcher.wait_until(lambda: sum(s is not None for s in watcher.lobby[table].seats) == 2)
    await guest.request(v1.LeaveTable(table=table))
    await host.request(v1.LeaveTable(table=table))
    await watcher.wait_until(lambda: table not in watcher.lobby)


async def test_quick_join_fills_an_open_table_before_making_one(server, connect) -> None:
    a, b, c = [await connect(server, name=n) for n in "ABC"]
    first = await a.request(v1.QuickJoin())
    second = await b.request(v1.QuickJoin())
    assert second.table.id == first.table.id
    assert second.seat == 1
    await c.request(v1.CreateTable(options=v1.TableOptions(seats=2, private=True)))
    third = await c.request(v1.QuickJoin())
    assert third.table.id == first.table.id


async def test_private_tables_need_the_invite(server, connect) -> None:
    host, guest, stranger = [await connect(server, name=n) for n in ("H", "G", "S")]
    joined = await host.request(v1.CreateTable(options=v1.TableOptions(private=True)))
    assert joined.invite
    listing = await stranger.request(v1.ListTables())
    assert joined.table.id not in [t.id for t in listing.tables]
    with pytest.raises(ServerError) as error:
        await stranger.request(v1.JoinTable(table=joined.table.id))
    assert error.value.code == ErrorCode.INVITE_REQUIRED
    seated = await guest.request(v1.JoinTable(table=joined.table.id, invite=joined.invite))
    assert seated.seat == 1
    assert seated.invite == joined.invite  # they came by it: theirs to pass on


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (v1.JoinTable(table="nope"), ErrorCode.NOT_FOUND),
        (v1.Act(table="nope", action={"type": "hit"}), ErrorCode.NOT_FOUND),
        (v1.CreateTable(options=v1.TableOptions(seats=9)), ErrorCode.BAD_MESSAGE),
        (v1.CreateTable(options=v1.TableOptions(decks=3)), ErrorCode.BAD_MESSAGE),
    ],
)
async def test_bad_requests_get_typed_errors(server, connect, request_, code) -> None:
    client = await connect(server)
    with pytest.raises(ServerError) as error:
        await client.request(request_)
    assert error.value.code == code


async def test_only_the_host_starts_and_only_with_two_ready(server, connect) -> None:
    host, guest = [await connect(server, name=n) for n in ("H", "G")]
    joined = await host.request(v1.CreateTable(options=v1.TableOptions(seats=2)))
    table = joined.table.id
    await guest.request(v1.JoinTable(table=table))
    with pytest.raises(ServerError) as error:
        await guest.request(v1.StartGame(table=table))
    assert error.value.code == ErrorCode.NOT_HOST
    await host.request(v1.SetReady(table=table))
    with pytest.raises(ServerError) as error:
        await host.request(v1.StartGame(table=table))
    assert error.value.code == ErrorCode.NOT_ENOUGH_PLAYERS
    with pytest.raises(ServerError) as error:
        await guest.request(v1.JoinTable(table=table, seat=0))
    assert error.value.code == ErrorCode.ALREADY_SEATED
    await guest.request(v1.SetReady(table=table))
    await host.request(v1.StartGame(table=table))
    with pytest.raises(ServerError) as error:
        await host.request(v1.StartGame(table=table))
    assert error.value.code == ErrorCode.GAME_RUNNING


async def test_the_host_fills_empty_seats_with_bots(server, connect) -> None:
    host = await connect(server, name="Host")
    options = v1.TableOptions(seats=4, private=True, round_pause_seconds=0)
    joined = await host.request(v1.CreateTable(options=options))
    table = joined.table.id
    state = host.tables[table]
    await host.request(v1.AddBots(table=table, count=5, strategy="bust_probability"))
    await host.wait_until(lambda: all(seat is not None for seat in state.info.seats))
    assert [bool(seat.bot) for seat in state.info.seats] == [False, True, True, True]
    assert all(seat.ready for seat in state.info.seats[1:])
    with pytest.raises(ServerError) as error:
        await host.request(v1.AddBots(table=table))
    assert error.value.code == ErrorCode.TABLE_FULL
    await host.request(v1.SetReady(table=table))
    await host.request(v1.StartGame(table=table))
    await host.wait_until(lambda: state.view is not None)
    await play_out(host, table)
    assert state.view["result"]["ranking"]


async def test_only_the_host_adds_bots(server, connect) -> None:
    host, guest = [await connect(server, name=n) for n in ("H", "G")]
    joined = await host.request(v1.CreateTable(options=v1.TableOptions(seats=4)))
    await guest.request(v1.JoinTable(table=joined.table.id))
    with pytest.raises(ServerError) as error:
        await guest.request(v1.AddBots(table=joined.table.id))
    assert error.value.code == ErrorCode.NOT_HOST


@pytest.mark.parametrize("game", list(GAMES))
def test_every_game_really_shows_every_viewer_the_same(game: str) -> None:
    """The room builds one copy of views and events for all viewers: true of every game."""
    import random

    spec = GAMES[game]
    options = v1.TableOptions(seats=4)
    engine = spec.create(options, f"same-view:{game}")
    seats = range(spec.seat_count(options))
    rng = random.Random(1)
    for _ in range(60):
        if engine.over:
            break
        step = spec.system_action(engine, list(seats), [])
        if step is not None:
            events = engine.apply(*step)
        else:
            seat = next(s for s in seats if engine.legal_actions(s))
            events = engine.apply(seat, rng.choice(engine.legal_actions(seat)))
        for viewer in seats:
            assert engine.view(viewer) == engine.view(None)
            for event in events:
                assert engine.event_view(event, viewer) == engine.event_view(event, None)
