"""Table chat through a real server (issue 37): a flood of lines is refused ``rate_limited``
without dropping the connection or touching another table, a line too long is a
``bad_message`` that changes nothing, a spectator the host sends away stops getting the table's
updates, and the Python client keeps the conversation (snapshot, then each line)."""

from __future__ import annotations

import asyncio

import pytest

from blackdrez.clients.client import RateLimited, ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.node.hosting import CHAT_BURST, REPORT_BURST
from tests.server.helpers import seat_and_start


def texts(client, table: str) -> list[str]:
    return [line.event["text"] for line in client.tables[table].chat]


async def test_a_chat_flood_is_refused_and_harms_no_one(server, connect) -> None:
    ann = await connect(server, name="Ann", rate_limit_retries=0)
    bob = await connect(server, name="Bob")
    table = await seat_and_start(ann, [bob])
    cat, dan = await connect(server, name="Cat"), await connect(server, name="Dan")
    other = await seat_and_start(cat, [dan])
    refused = 0
    for n in range(CHAT_BURST + 10):
        try:
            await ann.say(table, f"spam {n}")
        except RateLimited as error:
            refused += 1
            assert error.retry_after > 0
    assert refused >= 10, "past the burst, lines are refused"
    assert not ann.closed.done(), "talking too fast never drops the connection"
    # Another table plays on, and its chat is its own.
    await cat.say(other, "meanwhile, here")
    await dan.wait_until(lambda: texts(dan, other) == ["meanwhile, here"])
    await bob.wait_until(lambda: len(texts(bob, table)) == CHAT_BURST + 10 - refused)
    assert not any("meanwhile" in t for t in texts(bob, table))
    # Once the bucket has refilled a little, Ann may write again.
    await asyncio.sleep(2.1)
    await ann.say(table, "sorry")
    await bob.wait_until(lambda: texts(bob, table)[-1] == "sorry")


async def test_a_line_too_long_is_refused_and_changes_nothing(server, connect) -> None:
    ann, bob = await connect(server, name="Ann"), await connect(server, name="Bob")
    table = await seat_and_start(ann, [bob])
    before = ann.tables[table].seq
    with pytest.raises(ServerError) as error:
        await ann.request(v1.Say(table=table, text="x" * (v1.CHAT_CHARACTERS + 1)))
    assert error.value.code == ErrorCode.BAD_MESSAGE
    with pytest.raises(ServerError) as error:
        await ann.request(v1.Say(table=table, quick="rude"))  # type: ignore[arg-type]
    assert error.value.code == ErrorCode.BAD_MESSAGE
    await ann.say(table, "x" * v1.CHAT_CHARACTERS)  # the longest allowed
    await bob.wait_until(lambda: texts(bob, table) == ["x" * v1.CHAT_CHARACTERS])
    assert ann.tables[table].seq == before + 1
    assert not ann.closed.done()


async def test_a_spectator_sent_away_sees_no_more(server, connect) -> None:
    ann, bob = await connect(server, name="Ann"), await connect(server, name="Bob")
    table = await seat_and_start(ann, [bob])
    await ann.say(table, "before you came")
    cat = await connect(server, name="Cat")
    await cat.request(v1.Spectate(table=table))
    assert texts(cat, table) == ["before you came"], "the snapshot brings the chat"
    await cat.say(table, quick="hello")
    await ann.wait_until(lambda: texts(ann, table)[-1] == "Hello!")
    await ann.remove_spectator(table, cat.player)
    await cat.wait_until(
        lambda: any(e.event["type"] == "spectator_removed" for e in cat.tables[table].events)
    )
    await ann.say(table, "just us now")
    await bob.wait_until(lambda: texts(bob, table)[-1] == "just us now")
    await asyncio.sleep(0.2)
    assert "just us now" not in texts(cat, table), "no update reaches the removed spectator"
    with pytest.raises(ServerError) as error:
        await cat.request(v1.Spectate(table=table))
    assert error.value.code == ErrorCode.REMOVED


async def test_a_reported_line_reaches_the_operators_with_its_context(
    make_server, connect, redis_url_clean
) -> None:
    """Cat (watching through another node) reports one of Bob's lines: the table's host files
    it, with the lines before it, and any node's admin view lists it; nobody else is told."""
    from tests.server.test_admin import TOKEN, call

    host = await make_server(redis_url=redis_url_clean, node_id="n1", admin_token=TOKEN)
    other = await make_server(redis_url=redis_url_clean, node_id="n2", admin_token=TOKEN)
    ann, bob = await connect(host, name="Ann"), await connect(host, name="Bob")
    table = await seat_and_start(ann, [bob])
    for text in ("hi", "good luck", "you are <terrible>"):
        await (bob if text != "hi" else ann).say(table, text)
    cat = await connect(other, name="Cat")
    await cat.request(v1.Spectate(table=table))
    line = cat.tables[table].chat[-1]
    assert line.event["text"] == "you are <terrible>"
    events_before = len(bob.tables[table].events)
    await cat.report(table, line.seq, "rude\nand mean")
    with pytest.raises(ServerError) as error:
        await cat.request(v1.Report(table=table, seq=1))  # not a chat line
    assert error.value.code == ErrorCode.NOT_FOUND
    status, body = await asyncio.to_thread(call, other.port, "/admin/reports")
    assert status == 200
    (report,) = body["reports"]
    assert report["table"] == table and report["seq"] == line.seq
    assert report["line"]["name"] == "Bob" and report["line"]["text"] == "you are <terrible>"
    assert (report["reporter_name"], report["reason"]) == ("Cat", "rude and mean")
    assert [c["text"] for c in report["context"]] == ["hi", "good luck"]
    await asyncio.sleep(0.2)
    assert len(bob.tables[table].events) == events_before, "the table is not told"
    status, _ = await asyncio.to_thread(call, other.port, "/admin/reports", "GET", None)
    assert status == 401


async def test_a_table_closed_to_spectators_chat_says_so_and_refuses_them(server, connect) -> None:
    ann, cat = await connect(server, name="Ann"), await connect(server, name="Cat")
    joined = await ann.request(v1.CreateTable(spectator_chat=False))
    table = joined.table.id
    assert joined.table.spectator_chat is False
    assert joined.table.options == v1.TableOptions(), "not an option: older readers refuse those"
    await cat.request(v1.Spectate(table=table))
    assert cat.tables[table].info.spectator_chat is False
    with pytest.raises(ServerError) as error:
        await cat.say(table, "let me in")
    assert error.value.code == ErrorCode.CHAT_CLOSED
    await ann.say(table, "players may")


async def test_a_flood_of_reports_is_refused_and_the_reports_kept(server, connect) -> None:
    """Reports are few by nature: past five at once a player is told to wait (one every 30 s),
    so a flood cannot push the real reports out of the operators' list."""
    ann = await connect(server, name="Ann", rate_limit_retries=0)
    bob = await connect(server, name="Bob")
    table = await seat_and_start(ann, [bob])
    for n in range(REPORT_BURST + 1):
        await bob.say(table, f"line {n}")
    await ann.wait_until(lambda: len(ann.tables[table].chat) == REPORT_BURST + 1)
    lines = [line.seq for line in ann.tables[table].chat]
    for seq in lines[:REPORT_BURST]:
        await ann.report(table, seq, "spam")
    with pytest.raises(RateLimited) as error:
        await ann.report(table, lines[-1], "one more")
    assert 25 < error.value.retry_after <= 30
    assert len(await server.store.reports.recent(100)) == REPORT_BURST
    assert not ann.closed.done()


async def test_chat_and_reports_while_redis_is_down_change_nothing_and_work_after(
    make_server, connect
) -> None:
    """Redis stopped under a table: a line and a report are answered ``unavailable`` and change
    nothing (no line appears later); once Redis is back, both work, in order."""
    from blackdrez.server.testing.redis_server import RedisServer

    with RedisServer() as store:
        server = await make_server(redis_url=store.url)
        ann, bob = await connect(server, name="Ann"), await connect(server, name="Bob")
        table = await seat_and_start(ann, [bob])
        await bob.say(table, "before")
        await ann.wait_until(lambda: texts(ann, table) == ["before"])
        seq = ann.tables[table].chat[-1].seq
        store.pause()
        try:
            await asyncio.sleep(1.5)  # past the store's patience
            for request in (
                v1.Say(table=table, text="while down"),
                v1.Report(table=table, seq=seq, reason="while down"),
            ):
                with pytest.raises(ServerError) as error:
                    await ann.request(request, moving_patience=0)
                assert error.value.code in (ErrorCode.UNAVAILABLE, ErrorCode.MOVING)
        finally:
            store.resume()
        await asyncio.wait_for(server.store.health.wait_up(), 15)
        deadline = asyncio.get_running_loop().time() + 15
        while True:  # the table may be moving back to its host for a moment
            try:
                await ann.say(table, "after")
                break
            except ServerError as error:
                assert error.value.code in (ErrorCode.UNAVAILABLE, ErrorCode.MOVING)
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.2)
        await bob.wait_until(lambda: texts(bob, table)[-1:] == ["after"], 15)
        assert "while down" not in texts(bob, table)
        await ann.report(table, seq, "after")
        assert len(await server.store.reports.recent(10)) == 1
