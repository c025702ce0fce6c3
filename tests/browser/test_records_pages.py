"""The records pages in a real browser: sign up, sign in on a second browser (same identity and
history), the profile, the ratings, and the replay viewer stepping through a stored game."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page

from blackdrez.clients.bots import BOT_CLIENT, play_table
from blackdrez.clients.client import Client
from blackdrez.games import verify
from blackdrez.games.records import decode_record
from blackdrez.protocol import v1
from blackdrez.server import identity
from blackdrez.server.app import GameServer
from blackdrez.tools.ladder import ladder_bots, run_ladder
from tests.browser.helpers import create_table, resign, start_deal, table_state
from tests.browser.test_table_ux import add_bots, play_to_the_end
from tests.server.helpers import act_once, seat_and_start

DEADLINE = 180.0
PATIENCE_MS = 90_000
"""Playwright's waits on a loaded machine (the suite shares two cores with other work)."""


@pytest.fixture
def server(records_server: GameServer) -> GameServer:
    """A server that keeps records (``conftest.records_server``)."""
    return records_server


async def stored_games(server: GameServer, count: int, **filters: Any) -> list[Any]:
    """Wait until the records hold ``count`` games (matching ``filters``); return them."""
    assert server.records is not None
    deadline = time.monotonic() + DEADLINE
    while True:
        games, _ = await server.records.games(**filters)
        if len(games) >= count:
            return games
        assert time.monotonic() < deadline, "the games were not stored in time"
        await asyncio.sleep(0.1)


async def resign_a_blue_jacket_game(page: Page) -> None:
    """A finished game for this browser's player, through its own connection."""
    await page.evaluate(
        """async () => {
          const ctx = window.blackdrez.ctx;
          const joined = await ctx.conn.request({type: "start_solitaire", game: "blue_jacket"});
          await ctx.conn.request({type: "act", table: joined.table.id, action: {type: "resign"}});
        }"""
    )


async def test_sign_up_then_sign_in_on_a_second_browser_restores_identity_and_history(
    new_page, screenshot, server: GameServer
) -> None:
    ann = await new_page("Ann")
    ann.set_default_timeout(PATIENCE_MS)
    ann_player = await ann.evaluate("window.blackdrez.conn.welcome.player")
    await resign_a_blue_jacket_game(ann)
    (game,) = await stored_games(server, 1, player=ann_player)

    await ann.locator("#account-link").click()
    form = ann.locator("#sign-up")
    await form.locator("input[name=name]").fill("Ann Lee")
    await form.locator("input[name=password]").fill("correct horse battery")
    await screenshot(ann, "account")
    await form.get_by_role("button", name="Sign up").click()
    await ann.locator(".profile h2", has_text="Ann Lee").wait_for()
    assert "account" in (await ann.locator(".profile h2").text_content() or "")
    assert await ann.locator("#account-link").text_content() == "Profile"

    other = await new_page("Zed", width=390, height=844)  # a phone
    other.set_default_timeout(PATIENCE_MS)
    assert await other.evaluate("window.blackdrez.conn.welcome.player") != ann_player
    await other.goto(other.url.split("#")[0] + "#/account")
    sign_in = other.locator("#sign-in")
    await sign_in.locator("input[name=name]").fill("ann lee")
    await sign_in.locator("input[name=password]").fill("wrong password")
    await sign_in.get_by_role("button", name="Sign in").click()
    # said under the sign-in form, where the player looks (it was under the sign-up column)
    await sign_in.locator(".form-status.bad", has_text="Wrong name or password").wait_for()
    assert await other.locator("#sign-up .form-status.bad").count() == 0
    await sign_in.locator("input[name=password]").fill("correct horse battery")
    await sign_in.get_by_role("button", name="Sign in").click()
    await other.wait_for_function(
        f"window.blackdrez.conn.welcome && window.blackdrez.conn.welcome.player === {ann_player!r}"
    )
    await other.wait_for_function("document.getElementById('whoami').textContent === 'Ann Lee'")
    await other.locator(".profile h2", has_text="Ann Lee").wait_for()
    history = other.locator(".games .game-row")
    await history.first.wait_for()
    assert await history.count() == 1
    assert "Blue Jacket" in (await history.first.text_content() or "")
    link = await history.first.locator("a.replay-link").get_attribute("href")
    assert link == f"#/game/{game.id}"
    await screenshot(other, "profile-phone", full=False)
    width = await other.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, "nothing overflows the phone's width"
    await other.reload()  # the identity stays on this browser
    await other.locator("#status[data-state=open]").wait_for()
    assert await other.evaluate("window.blackdrez.conn.welcome.player") == ann_player


async def test_the_replay_viewer_steps_through_the_record(
    new_page, screenshot, server: GameServer
) -> None:
    url = f"ws://127.0.0.1:{server.port}/"
    ladder = run_ladder(url, server.secret, 1, games=1, think=0, round_pause=0)
    await asyncio.wait_for(ladder, DEADLINE)
    (summary,) = await stored_games(server, 1)
    assert server.records is not None
    record = await server.records.game(summary.id)
    assert record is not None
    # The spectator's view after each action, replayed here with the engine itself
    engine = verify.start(record)
    hands = [[s.hand for s in engine.view(None).seats]]
    for _ in verify.steps(engine, record):
        hands.append([s.hand for s in engine.view(None).seats])

    page = await new_page("Viewer")
    page.set_default_timeout(PATIENCE_MS)
    await page.goto(page.url.split("#")[0] + f"#/game/{summary.id}")
    viewer = page.locator(".records[data-step]")
    await viewer.wait_for()

    async def shown() -> tuple[int, list[list[str]]]:
        step = int(await viewer.get_attribute("data-step") or -1)
        seats = page.locator(".replay-seat")
        cards = []
        for index in range(await seats.count()):
            codes = seats.nth(index).locator(".hand [data-card]")
            cards.append(await codes.evaluate_all("cards => cards.map(c => c.dataset.card)"))
        return step, cards

    assert await shown() == (0, hands[0])
    total = len(record.actions)
    assert f"of {total}" in (await page.locator(".replay-counter").text_content() or "")
    forward = page.locator("#replay-forward")
    for expected in range(1, min(total, 6) + 1):
        await forward.click()
        assert await shown() == (expected, hands[expected])
    await page.locator("#replay-back").click()
    step, cards = await shown()
    assert (step, cards) == (step, hands[step]) and step == min(total, 6) - 1
    await page.keyboard.press("ArrowRight")
    assert (await shown())[0] == step + 1
    rounds = page.locator("#replay-round option")
    if await rounds.count() > 3:  # start, round 1, round 2..., end
        await page.locator("#replay-round").select_option(label="Round 2")
        step, cards = await shown()
        assert cards == hands[step] and "round 2" in (
            await page.locator(".replay-counter").text_content() or ""
        )
    await page.locator("#replay-end").click()
    assert await shown() == (total, hands[total])
    assert await forward.is_disabled()
    fair = page.locator(".fairness-check")
    assert "Fair deal, verified" in (await fair.text_content() or "")
    assert summary.id in (await page.locator("#share-link").input_value())
    await page.locator("#replay-first").click()
    await forward.click()
    await forward.click()
    await screenshot(page, "replay")

    phone = await new_page("Phone", width=390, height=844)
    phone.set_default_timeout(PATIENCE_MS)
    await phone.goto(phone.url.split("#")[0] + f"#/game/{summary.id}")
    await phone.locator(".records[data-step]").wait_for()
    for _ in range(3):
        await phone.locator("#replay-forward").click()
    await screenshot(phone, "replay-phone", full=False)
    width = await phone.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, "nothing overflows the phone's width"

    # The players' profiles and the ratings page show the ladder bots, labelled as bots
    await page.locator(".replay-players a").first.click()
    await page.locator(".profile h2 .badge.bot").wait_for()
    await page.locator(".rating-panel .chart-empty").wait_for()  # one rated game: no chart yet
    await screenshot(page, "profile")
    await page.locator(".records-nav a", has_text="Ratings").click()
    rows = page.locator(".rec-board tbody tr")
    await rows.first.wait_for()
    assert await page.locator(".boards-grid > div").nth(2).locator("tbody tr").count() == 4
    await screenshot(page, "ratings")


async def test_the_lobby_and_the_table_show_each_seated_players_rating_and_bots_as_bots(
    new_page, screenshot, server: GameServer
) -> None:
    url = f"ws://127.0.0.1:{server.port}/"
    await asyncio.wait_for(run_ladder(url, server.secret, 1, games=1, think=0, round_pause=0), 120)
    await stored_games(server, 1)
    assert server.records is not None
    veteran, veteran_name, _ = ladder_bots(0)[0]
    rated = (await server.records.ratings("blackdrez", [veteran]))[veteran]
    expected = f"{rated.display}?"  # one rated game: provisional

    ann = await new_page("Ann")
    ann.set_default_timeout(PATIENCE_MS)
    ann_player = await ann.evaluate("window.blackdrez.conn.welcome.player")
    await create_table(ann, "Rated evening", seats=3, rated=True)
    table = (await table_state(ann))["id"]
    token = identity.issue_token(server.secret, veteran, veteran_name)
    bot = await Client.connect(url, token=token.text, client_name=BOT_CLIENT)
    try:
        await bot.request(v1.JoinTable(table=table))
        bot_seat = ann.locator(".seat[data-seat='1']")
        await bot_seat.locator(f".rating-tag[data-rating='{rated.display}']").wait_for()
        assert await bot_seat.locator(".rating-tag").text_content() == expected
        assert await bot_seat.locator(".badge.bot").count() == 1
        mine = ann.locator(".seat[data-seat='0'] .rating-tag")
        assert await mine.text_content() == "1500?", "a new player starts at 1500, provisional"
        assert await mine.get_attribute("data-provisional") == "true"
        assert await ann.locator(".table-head .badge.rated").count() == 1
        await screenshot(ann, "blackdrez-rated")

        phone = await new_page("Bea", width=390, height=844)
        phone.set_default_timeout(PATIENCE_MS)
        row = phone.locator(f".table-row[data-table='{table}']")
        await row.locator(".badge.rated").wait_for()
        their = row.locator(f".player[data-player='{veteran}']")
        await their.locator(".rating-tag").wait_for()
        assert await their.locator(".rating-tag").text_content() == expected
        assert await their.locator(".badge.bot").count() == 1
        host = row.locator(f".player[data-player='{ann_player}']")
        assert await host.locator(".rating-tag").text_content() == "1500?"
        assert await host.locator(".badge.bot").count() == 0
        await row.scroll_into_view_if_needed()
        await screenshot(phone, "lobby-rated-phone", full=False)
        width = await phone.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, "nothing overflows the phone's width"
        await row.get_by_role("button", name="Watch").click()
        await phone.locator(".seat[data-seat='1'] .rating-tag").wait_for()
        await screenshot(phone, "blackdrez-rated-phone", full=False)
        width = await phone.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, "nothing overflows the phone's width"
    finally:
        await bot.close()


async def test_a_seat_kept_for_a_rated_games_leaver_is_not_offered_as_free(
    new_page, screenshot, server: GameServer
) -> None:
    """Ann played a round of a rated game and left: her seat keeps her result until the game
    ends, and a join there is refused. The lobby offered it (Join enabled, the seat counted
    free) and the table showed it empty with Sit here; now both say it is kept for her."""
    url = f"ws://127.0.0.1:{server.port}/"
    ann, bob, cid = [await Client.connect(url, name=name) for name in ("Ann", "Bob", "Cid")]
    try:
        table = await seat_and_start(ann, [bob, cid], rated=True, max_rounds=5, turn_seconds=600)
        while ann.tables[table].info.round < 2:
            await act_once([ann, bob, cid], table)
        await ann.request(v1.LeaveTable(table=table))
        while not bob.tables[table].info.held:
            await act_once([ann, bob, cid], table)  # Ann withdraws at her turn, then is gone
        assert [h.name for h in bob.tables[table].info.held] == ["Ann"]

        dee = await new_page("Dee", width=390, height=844)
        dee.set_default_timeout(PATIENCE_MS)
        row = dee.locator(f".table-row[data-table='{table}']")
        await row.locator(".table-meta", has_text="1 kept for a player who left").wait_for()
        assert await row.get_by_role("button", name="Join").is_disabled()
        await row.scroll_into_view_if_needed()
        await screenshot(dee, "lobby-kept-seat-phone", full=False)
        await row.get_by_role("button", name="Watch").click()
        kept = dee.locator(".seat.kept[data-seat='0']")
        await kept.wait_for()
        assert "Kept for Ann" in (await kept.text_content() or "")
        assert await kept.get_by_role("button", name="Sit here").count() == 0
        log = dee.locator("text=Ann left seat 1: it is kept for them until this rated game ends")
        await log.wait_for()
        await screenshot(dee, "blackdrez-kept-seat-phone", full=False)
    finally:
        for client in (ann, bob, cid):
            await client.close()


async def test_a_private_tables_game_is_in_its_players_profile_and_nobody_elses(
    new_page, screenshot, server: GameServer
) -> None:
    """A private table's game is served only to its players, who say who they are with their
    token: the browser sends it, so Ann finds the game in her profile (marked private) and can
    replay and download it; another browser sees neither her game nor its page."""
    url = f"ws://127.0.0.1:{server.port}/"
    ann, bob = await Client.connect(url, name="Ann"), await Client.connect(url, name="Bob")
    try:
        table = await seat_and_start(ann, [bob], max_rounds=1, private=True)
        await asyncio.gather(play_table(ann, table), play_table(bob, table))
        (game,) = await stored_games(server, 1, player=ann.player, viewer=ann.player)
        token, player = ann.token, ann.player
    finally:
        await ann.close()
        await bob.close()

    page = await new_page("Someone")
    page.set_default_timeout(PATIENCE_MS)
    await page.evaluate("token => localStorage.setItem('blackdrez.token', token)", token)
    await page.goto(page.url.split("#")[0] + f"#/player/{player}")
    await page.reload()  # greets with Ann's token now
    await page.wait_for_function(f"window.blackdrez.conn.welcome?.player === {player!r}")
    row = page.locator(".games .game-row")
    await row.first.wait_for()
    assert await row.count() == 1
    assert await row.first.locator(".badge.private").count() == 1
    await screenshot(page, "profile-private-game", full=False)
    await row.first.locator("a.replay-link").click()
    await page.locator(".records[data-step]").wait_for()
    assert await page.locator(".replay-head .badge.private").count() == 1
    async with page.expect_download() as download:
        await page.get_by_role("link", name="Download the record").click()
    saved = await (await download.value).path()
    assert verify.verify(decode_record(Path(saved).read_bytes())) == []

    other = await new_page("Zed", width=390, height=844)
    other.set_default_timeout(PATIENCE_MS)
    await other.goto(other.url.split("#")[0] + f"#/player/{player}")
    await other.locator(".profile h2", has_text="Ann").wait_for()
    assert await other.locator(".games .game-row").count() == 0
    await other.goto(other.url.split("#")[0] + f"#/game/{game.id}")
    await other.locator(".records h2", has_text="Not found").wait_for()


async def test_a_replay_reads_right_before_the_deal_and_fits_a_phone(
    new_page, screenshot, server: GameServer
) -> None:
    """At step 0 every seat said "out of the round" and "no cards", as if the players had
    left; it waits for the deal. On a phone a bot's name cut short pushed its "bot" badge past
    the screen's edge: the badge stays in its seat and the name reads whole on hover."""
    url = f"ws://127.0.0.1:{server.port}/"
    await asyncio.wait_for(run_ladder(url, server.secret, 1, games=1, think=0), DEADLINE)
    (summary,) = await stored_games(server, 1)
    phone = await new_page("Phone", width=390, height=844)
    phone.set_default_timeout(PATIENCE_MS)
    await phone.goto(phone.url.split("#")[0] + f"#/game/{summary.id}")
    await phone.locator(".records[data-step='0']").wait_for()
    seats = phone.locator(".replay-seat")
    text = " ".join(await seats.all_text_contents())
    assert "out of the round" not in text and "no cards" not in text, text
    assert await seats.locator(".seat-status").all_text_contents() == ["waiting for the deal"] * 4
    await screenshot(phone, "replay-start-phone", element=".replay-board")
    badges = await phone.evaluate(
        "[...document.querySelectorAll('.replay-seat')].map(seat => {"
        " const box = seat.getBoundingClientRect();"
        " const badge = seat.querySelector('.badge.bot').getBoundingClientRect();"
        " return badge.left >= box.left && badge.right <= box.right && badge.right <= 390; })"
    )
    assert badges == [True] * 4
    names = [p.name for p in (await server.records.game(summary.id)).players]  # type: ignore[union-attr]
    titles = await seats.locator(".seat-name .name").evaluate_all(
        "names => names.map(n => n.title)"
    )
    assert sorted(titles) == sorted(names)
    await phone.locator("#replay-forward").click()
    assert "out of the round" not in " ".join(await seats.all_text_contents())


async def test_a_rated_games_end_shows_the_players_rating_change(new_page, screenshot) -> None:
    """At a rated game's end the player sees their rating move ("1500 \u2192 1569 (+69)"), once
    the game is stored, beside the ranking."""
    page = await new_page("Rated", width=390, height=844)
    await create_table(page, "Rated one", seats=2, max_rounds=1, rated=True, pause=0.3)
    await add_bots(page, 1)
    await page.locator(".seat.mine .rating-tag").wait_for()
    await page.locator("#start").click()
    await play_to_the_end(page)
    line = page.locator("#rating-change")
    await line.wait_for(timeout=30000)
    text = await line.text_content() or ""
    assert re.fullmatch(r"Your rating: 1500 \u2192 \d{3,4} \([+\u2212-]?\d+\)", text), text
    await screenshot(page, "blackdrez-rating-change-phone", full=False)


async def test_a_guest_reaches_their_own_games_from_the_header(new_page, base_url: str) -> None:
    """A guest had no link to their history ("Your tables and games: None yet" after five
    games): the header has "Your games", which says what will show before the first finished
    game, and lists it after."""
    page = await new_page("Guesty", width=390, height=844)
    link = page.locator("#my-games-link")
    await link.click()
    await page.locator(".records h2", has_text="Your games").wait_for()
    await page.go_back()
    await start_deal(page, "blackjack_piles", 3)
    await resign(page)
    me = await page.evaluate("window.blackdrez.conn.welcome.player")
    await stored_profile(base_url, me)  # the records keep it a moment after the game ends
    await link.click()
    await page.locator(".records .profile").wait_for()
    await page.locator(".records", has_text="Blackjack Piles").first.wait_for()
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390


async def stored_profile(base_url: str, player: str, within: float = 30.0) -> None:
    """Wait until the records API has ``player``'s profile (their first game stored)."""
    deadline = time.monotonic() + within
    url = f"{base_url}api/v1/players/{player}"
    while True:
        try:  # (in a thread: the server answers on this test's event loop)
            await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).close())
            return
        except urllib.error.HTTPError as error:
            if error.code != 404 or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)
