"""Arenas in the browser: a player makes an arena of two and joins it, another opens it from the
lobby's list and joins; both are taken to the same table, play it to its end, and the standings
on the arena's page move (one game each, the winner's point) and the game is listed there with
its replay (as the records stored it); the automatic pairing and Next game each lead to the next
table, three games in all, and the standings count them. A private arena is shown to whoever
has its link only."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from playwright.async_api import Page

from blackdrez.server.app import GameServer
from tests.browser.helpers import no_sideways_scroll, play_turn, settled, wait_until

ARENA_URL = re.compile(r"#/arena/([^/#?]+)(\?invite=[^&#]+)?$")
TABLE_URL = re.compile(r"#/table/([^/#?]+)$")
PATIENCE_MS = 20_000
GAME_SECONDS = 120  # a game of two runs until the stock is out: ten rounds or so, 3 s apart
STANDINGS = "(window.blackdrez.arenas.known.get({arena!r})?.standings ?? [])"
ANNOUNCED = "document.getElementById('announce').textContent"
MOVED = """(arena) => {
  const arenas = window.blackdrez.arenas;
  const { arena: info, standings: [mine] } = arenas.known.get(arena);
  const ahead = { ...mine, rank: 1, player: 'p_ola', name: 'Ola', points: 2, results: [1, 1] };
  const standings = [{ ...ahead, games: 2 }, { ...mine, rank: 2 }];
  arenas.receive({ type: 'arena_standings', arena: info, standings });
}"""
"""A push of the arena's standings with someone new ahead of the page's player (its only line)."""
ENDED = """(arena) => {
  const arenas = window.blackdrez.arenas;
  const { arena: info, standings } = arenas.known.get(arena);
  const now = window.blackdrez.conn.serverNow();
  const ended = { ...info, starts: now - 60, ends: now - 1, status: 'finished' };
  arenas.receive({ type: 'arena_standings', arena: ended, standings });
}"""
"""A push of the arena's standings as it ends."""


@pytest.fixture
def server(records_server: GameServer) -> GameServer:
    """A server that keeps records (``conftest.records_server``): the arena's games listed."""
    return records_server


def arena_in(url: str) -> str | None:
    found = ARENA_URL.search(url)
    return found.group(1) if found else None


def table_in(url: str) -> str | None:
    found = TABLE_URL.search(url)
    return found.group(1) if found else None


async def create_arena(
    page: Page, name: str, seats: int = 2, minutes: int = 5, private: bool = False
) -> str:
    """Fill the lobby's arena form, and land on the new arena's page: its id."""
    form = page.locator("#create-arena")
    await form.get_by_label("Name").fill(name)
    await form.get_by_label("Minutes").fill(str(minutes))
    await form.get_by_label("Seats").fill(str(seats))
    if private:
        await form.get_by_label("Private").check()
    await form.get_by_role("button", name="Create arena").click()
    await page.locator(".arena-page h2#arena-title", has_text=name).wait_for()
    arena = arena_in(page.url)
    assert arena is not None, page.url
    return arena


async def join_arena(page: Page, *, another_waits: bool = False) -> None:
    """Press Join on the arena's page: the wait shows, the focus on Leave arena. When another
    player already waits (``another_waits``), the table may be made before a frame of the wait
    is drawn (met on CI): either is enough then, the focus checked on the first joiner's."""
    await page.locator("#arena-join", has_text="Join").click()
    waiting = page.locator(".arena-me", has_text="Waiting for your table")
    if another_waits:
        paired = page.locator(".toast", has_text="Your arena table: you and")
        await waiting.or_(paired).first.wait_for()
        return
    await waiting.wait_for()
    # (the focus where Join was, as find.js's Cancel)
    await wait_until(page, "document.activeElement.id === 'arena-leave'")


async def test_two_players_of_an_arena_play_its_table_and_the_standings_move(
    new_page, screenshot
) -> None:
    ann = await new_page("Ann", width=1280, height=800)
    bob = await new_page("Bob", width=390, height=844)
    for page in (ann, bob):
        page.set_default_timeout(PATIENCE_MS)
    arena = await create_arena(ann, "Evening arena")
    await ann.locator(".arena-clock", has_text=re.compile(r"Ends in [45]:\d\d")).wait_for()
    assert await ann.locator(".standings-panel .empty").text_content() == "Nobody has joined yet."
    await join_arena(ann)
    await ann.locator(".standings tr.mine", has_text="Ann").wait_for()

    # Bob finds it in the lobby's list, and its page has an address: Back, Forward, reload.
    row = bob.locator(".arena-row", has_text="Evening arena")
    await row.wait_for()
    assert re.search(r"running.*casual", await row.text_content() or "")
    assert re.search(r"ends in [45]:\d\d · tables of 2", await row.text_content() or "")
    await row.scroll_into_view_if_needed()
    await screenshot(bob, "arena-lobby-phone", element=".arenas-panel")
    await row.get_by_role("link", name="Evening arena").click()
    await bob.locator(".arena-page .standings", has_text="Ann").wait_for()
    assert arena_in(bob.url) == arena
    await bob.go_back()
    await bob.locator(".lobby").wait_for()
    await bob.go_forward()
    await bob.locator(".arena-page .standings", has_text="Ann").wait_for()
    await bob.reload()
    await bob.locator(".arena-page .standings", has_text="Ann").wait_for()
    await join_arena(bob, another_waits=True)

    # Both are taken to the same table, the arena's.
    for page in (ann, bob):
        await page.locator(".toast", has_text="Your arena table: you and").wait_for()
        await page.locator(".blackdrez .seat.mine").wait_for()
    table = table_in(ann.url)
    assert table is not None and table_in(bob.url) == table, (ann.url, bob.url)
    info = await ann.evaluate("window.blackdrez.table().info")
    assert info["arena"] == arena and info["name"] == "Arena table of 2"
    for page in (ann, bob):
        await page.locator(".arena-bar a", has_text="Evening arena").wait_for()
    # Bob stops the automatic pairing (he will press Next game); Ann keeps it (the default).
    assert await ann.locator("#arena-keep").is_checked()
    await bob.locator("#arena-keep").uncheck()

    await play_to_the_end(ann, bob)
    state = await bob.evaluate("window.blackdrez.table()")
    names = {i: seat["name"] for i, seat in enumerate(state["info"]["seats"]) if seat}
    first = state["view"]["result"]["ranking"][0]["seats"]
    winners = {names[s] for s in first}

    # Ann is paired again by herself a few seconds later: the arena's page, waiting there.
    await ann.locator(".arena-auto", has_text="Your next table in").wait_for()
    # Bob's result: Next game, the way back to the arena; the table's own "again" is not offered.
    await bob.locator("#arena-next").wait_for()
    assert await bob.locator(".game-over .again").is_hidden()
    assert not await bob.locator("#arena-keep").is_checked()
    await bob.locator(".game-over").scroll_into_view_if_needed()
    await settled(bob)
    await screenshot(bob, "arena-game-over-phone", full=False)
    await no_sideways_scroll(bob, 390)

    await ann.locator(".arena-page .arena-me", has_text="Waiting for your table").wait_for()
    assert arena_in(ann.url) == arena
    games = STANDINGS.format(arena=arena)
    await wait_until(ann, f"{games}.length === 2 && {games}.every((s) => s.games === 1)", 10_000)
    lines = {s["name"]: s for s in await ann.evaluate(games)}
    for name, line in lines.items():
        won = name in winners
        # a table of two: the winner scores the one player below; a shared first place, nothing
        assert line["points"] == (1 if won and len(winners) == 1 else 0), lines
        assert line["wins"] == (1 if won else 0) and line["results"] == [line["points"]], lines
    top = ann.locator(".standings tbody tr").first
    if len(winners) == 1:
        assert (await top.locator(".name").text_content()) in winners
        assert await top.locator("td.line-points").text_content() == "1"
    assert await ann.locator(".standings tbody tr.mine .name").text_content() == "Ann"
    # The game is listed below as the records stored it, its players by place, with its replay.
    row = ann.locator(".arena-games .game-row")
    await row.first.wait_for()
    assert await row.count() == 1
    listed = await row.first.text_content() or ""
    assert "Ann" in listed and "Bob" in listed and "1st" in listed, listed
    replay = await row.first.locator("a.replay-link").get_attribute("href") or ""
    assert re.fullmatch(rf"#/game/{re.escape(table)}:\d+", replay), replay
    await screenshot(ann, "arena-standings", full=False)

    # Bob goes to the arena's page (his line marked), and presses Next game: a new table for both.
    await bob.locator(".arena-next a", has_text="Arena standings").click()
    await bob.locator(".arena-page .standings tr.mine", has_text="Bob").wait_for()
    await wait_until(bob, f"{games}.every((s) => s.games === 1)")
    assert await bob.locator(".standings tr.mine td.line-games").text_content() == "1"
    await bob.locator(".arena-games .game-row").first.wait_for()
    await bob.locator(".standings").scroll_into_view_if_needed()
    await screenshot(bob, "arena-standings-phone")
    await no_sideways_scroll(bob, 390)
    # Its replay from the page's games, and Back to the page.
    await bob.locator(".arena-games a.replay-link").first.click()
    await bob.locator(".replay-board").wait_for()
    await bob.go_back()
    await bob.locator(".arena-page .arena-games .game-row").first.wait_for()
    await bob.locator("#arena-join", has_text="Next game").click()
    for page in (ann, bob):
        await wait_until(
            page,
            f"(location.hash.match(/^#\\/table\\/(.+)$/) || [])[1] !== {table!r}"
            " && location.hash.startsWith('#/table/')",
            PATIENCE_MS,
        )
        await page.locator(".blackdrez .seat.mine").wait_for()
    assert table_in(ann.url) == table_in(bob.url) != table
    # The finished table was left on the way (it is no longer among theirs).
    for page in (ann, bob):
        await wait_until(page, f"!window.blackdrez.store.get({table!r})")

    # Two more games, each at a new table (Ann paired by herself, Bob with Next game at the
    # game's end): three games each in the standings, three in the page's games.
    tables = {table}
    for _ in range(2):
        here = table_in(ann.url)
        assert here is not None and here not in tables
        tables.add(here)
        await play_to_the_end(ann, bob)
        await bob.locator("#arena-next").click()
        for page in (ann, bob):
            await wait_until(
                page,
                f"location.hash.startsWith('#/table/') && !{sorted(tables)!r}.includes("
                "decodeURIComponent(location.hash.slice(8)))",
                PATIENCE_MS,
            )
            await page.locator(".blackdrez .seat.mine").wait_for()
    await ann.goto(ann.url.split("#")[0] + f"#/arena/{arena}")
    await wait_until(ann, f"{games}.length === 2 && {games}.every((s) => s.games === 3)", 10_000)
    assert await ann.locator(".standings tr.mine td.line-games").text_content() == "3"
    await ann.locator(".arena-games .game-row").nth(2).wait_for()
    assert await ann.locator(".arena-games .game-row").count() == 3
    lines = await ann.evaluate(games)
    for line in lines:  # a point a game won at a table of two, two once on fire
        assert sum(line["results"]) == line["points"] and set(line["results"]) <= {0, 1, 2}
    shown = [await cell.text_content() for cell in await ann.locator("td.line-points").all()]
    assert sorted(int(text or 0) for text in shown) == sorted(line["points"] for line in lines)


async def play_to_the_end(*pages: Page) -> None:
    """Play the game on screen in every page (each acting on its turn) until it is over."""
    deadline = time.monotonic() + GAME_SECONDS
    while not all([await page.locator(".game-over").count() for page in pages]):
        assert time.monotonic() < deadline, "the game did not end in time"
        acted = False
        for page in pages:
            if await page.locator(".game-over").count() == 0 and await play_turn(page):
                acted = True
        if not acted:
            await asyncio.sleep(0.05)


async def test_a_private_arena_is_opened_by_its_link_only(new_page, screenshot) -> None:
    mia = await new_page("Mia", width=1280, height=800)
    await mia.context.grant_permissions(["clipboard-read", "clipboard-write"])
    arena = await create_arena(mia, "Secret arena", private=True)
    await mia.locator(".arena-title-row .badge.private").wait_for()
    link = await mia.locator("#arena-invite-link").input_value()
    assert re.search(rf"#/arena/{arena}\?invite=[\w-]+$", link), link
    await mia.locator("#copy-arena-link").click()
    await mia.locator(".toast", has_text="Link copied").wait_for()
    assert await mia.evaluate("navigator.clipboard.readText()") == link

    gus = await new_page("Gus", width=390, height=844)
    gus.set_default_timeout(PATIENCE_MS)
    await gus.locator(".arena-list .empty", has_text="No arenas just now").wait_for()  # unlisted
    # Without the invite: refused, in words.
    await gus.goto(gus.url.split("#")[0] + f"#/arena/{arena}")
    refused = gus.locator(".arena-problem [role=alert]")
    await refused.wait_for()
    assert "private" in (await refused.text_content() or "")
    assert await gus.locator("#arena-join").count() == 0
    await screenshot(gus, "arena-private-refused-phone", full=False)
    # With the link: the arena, and Join.
    await gus.goto(link)
    await gus.locator(".arena-page h2#arena-title", has_text="Secret arena").wait_for()
    assert await gus.locator("#arena-invite-link").count() == 0, "the maker's to send"
    await join_arena(gus)
    await mia.locator(".standings", has_text="Gus").wait_for()  # live, on the maker's page
    await screenshot(mia, "arena-private", full=False)
    # A reload keeps the wait (the place in the queue kept), and Leave arena ends it.
    await gus.reload()
    await gus.locator(".arena-me", has_text="Waiting for your table").wait_for()
    await gus.get_by_role("button", name="Leave arena").click()
    await gus.locator(".toast", has_text="You left the arena").wait_for()
    await wait_until(gus, f"{ANNOUNCED}.startsWith('You left the arena')")
    await gus.locator(".standings tr.mine .badge.left").wait_for()
    await gus.locator("#arena-join", has_text="Join").wait_for()
    await no_sideways_scroll(gus, 390)
    # A push that moves the player's line (as another's game would) is said, once it holds.
    await gus.evaluate(MOVED, arena)
    await gus.locator(".standings tbody tr").first.locator(".name", has_text="Ola").wait_for()
    assert await gus.locator(".standings tr.mine td.rank").text_content() == "2"
    await wait_until(gus, f"{ANNOUNCED} === 'You are now 2nd in Secret arena, with 0 points.'")
    # Once over (a push as at its end): the final standings; Join disabled, saying why.
    await gus.evaluate(ENDED, arena)
    await gus.locator("#standings-title", has_text="Final standings").wait_for()
    assert await gus.locator("#arena-join").is_disabled()
    assert await gus.locator("#arena-why").text_content() == (
        "This arena has ended: you finished 2nd with 0 points."
    )
    # (the end is the simulated one, "now": a minute may turn between the two reads)
    ended = await gus.locator(".arena-clock").text_content() or ""
    assert re.fullmatch(r"Ended at \d\d:\d\d( [AP]M)?", ended), ended
    await screenshot(gus, "arena-finished-phone", full=False)
