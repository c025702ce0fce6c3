"""Hint, Undo, the daily deal and the leaderboards in the browser.

A numbered Blue Jacket deal makes the hint known in advance: the test asks the same bot the
server asks and checks that the page highlights that move's source and destination. Undo brings
the board back exactly; a daily deal's line says how the game is ranked, and the lobby's board
shows the entry with its day and deal, and its record (sealed until the day ends; a random
deal's record downloads and verifies).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from playwright.async_api import Page

from blackdrez.games import GAMES
from blackdrez.games.blue_jacket import rules as bj
from blackdrez.games.records import read_record
from blackdrez.games.verify import verify
from blackdrez.server.table.assist import hint
from tests.browser.helpers import (
    click_and_wait,
    create_table,
    seq,
    start_deal,
    table_state,
    wait_until,
)
from tests.browser.helpers import resign as resign_here

DEAL = 3


async def resign(page: Page) -> None:
    await resign_here(page)
    await page.locator("#final-score").wait_for()


async def test_hint_highlights_the_move_and_undo_takes_it_back(new_page, screenshot) -> None:
    page = await new_page("Sol")
    await start_deal(page, "blue_jacket", DEAL)
    engine = bj.BlueJacket.new(bj.Config(), GAMES["blue_jacket"].deal_seed(DEAL))
    expected = msgspec.to_builtins(hint("blue_jacket", engine, 0))
    assert expected["type"] == "move"
    undo = page.locator("#undo")
    assert await undo.is_disabled()
    assert "Nothing to undo" in (await undo.get_attribute("title") or "")
    assert "not ranked" in (await page.locator("#ranking").text_content() or "")

    await page.locator("#hint").click()
    source = page.locator(f"[data-loc='{expected['source']}']")
    target = page.locator(f"[data-loc='{expected['target']}']")
    await page.locator(".hinted-from").wait_for()
    assert "hinted-from" in (await source.get_attribute("class") or "")
    assert "hinted-to" in (await target.get_attribute("class") or "")
    assert await page.locator(".hinted-from, .hinted-to").count() == 2
    toast = page.locator(".toast", has_text="Hint:")
    assert "move the" in (await toast.first.text_content() or "")
    await screenshot(page, "blue-jacket-hint", full=False)

    before = await table_state(page)
    await source.click()
    await click_and_wait(page, target)
    assert await page.locator(".hinted-from").count() == 0, "the highlight goes with the move"
    await page.wait_for_function("!document.querySelector('#undo').disabled")
    await click_and_wait(page, undo)
    after = await table_state(page)
    assert after["view"] == before["view"] and after["legal"] == before["legal"]
    assert await undo.is_disabled()
    assert await page.locator("#stat-moves").text_content() == "0"


async def one_move_of_the_deal(page: Page) -> dict:
    """Deal Blue Jacket's test deal and play its first move with the mouse (Undo is enabled
    then); the table's state before the move."""
    await start_deal(page, "blue_jacket", DEAL)
    state = await table_state(page)
    move = next(a for a in state["legal"] if a["type"] == "move")
    await page.locator(f"[data-loc='{move['source']}']").click()
    await click_and_wait(page, page.locator(f"[data-loc='{move['target']}']"))
    await page.wait_for_function("!document.querySelector('#undo').disabled")
    return state


async def test_undo_by_key_and_a_deal_ends_what_can_be_taken_back(new_page) -> None:
    page = await new_page("Keys")
    state = await one_move_of_the_deal(page)
    before = await seq(page)
    await page.keyboard.press("u")
    await page.wait_for_function(f"window.blackdrez.table().seq > {before}")
    assert (await table_state(page))["view"] == state["view"]
    await page.keyboard.press("u")  # nothing left to take back: said in words
    toast = page.locator(".toast", has_text="Nothing to undo")
    await toast.first.wait_for()


async def test_the_daily_deal_is_ranked_and_its_entry_shows_day_and_record(
    new_page, screenshot, server
) -> None:
    page = await new_page("Daily")
    await page.locator("[data-daily=blue_jacket]").wait_for()
    line = await page.locator("[data-daily=blue_jacket]").text_content() or ""
    assert "Daily deal of" in line and "revealed when the day ends" in line
    await page.locator("[data-start-daily=blue_jacket]").click()
    await page.locator("#stat-score").wait_for()
    ranking = page.locator("#ranking")
    assert "· ranked" in (await ranking.text_content() or "")
    await page.locator("#hint").click()
    await page.wait_for_function(
        "document.querySelector('#ranking').textContent.includes('ranked apart (1 hint)')"
    )
    await resign(page)
    assert await page.locator("#seed").count() == 0, "the daily seed stays hidden"
    await page.locator("[data-key=leave]").click()
    board = page.locator(".board[data-board=blue_jacket]")
    await page.locator("select[name=deal]").wait_for()
    await page.locator("input[name=assisted]").check()
    entry = board.locator("ol.leaderboard li", has_text="Daily")
    await entry.wait_for()
    text = await entry.text_content() or ""
    assert "daily" in text and "1 hint" in text
    await screenshot(page, "lobby-leaderboards", element=".solitaire-panel")
    # sealed until the UTC day ends: the button says so and until when (no click for a refusal)
    sealed = entry.locator("button.record")
    assert await sealed.is_disabled()
    assert "sealed until" in (await sealed.text_content() or "")
    assert "day ends (UTC)" in (await sealed.get_attribute("title") or "")


async def test_a_random_deals_record_downloads_and_verifies(
    new_page, screenshot, tmp_path: Path
) -> None:
    page = await new_page("Rand", width=390, height=844)
    await page.locator("[data-start=blue_jacket]").click()
    await page.locator("#stat-score").wait_for()
    await page.locator("#hint").click()
    await page.locator(".hinted-from").wait_for()
    await screenshot(page, "blue-jacket-hint-phone", full=False)
    await page.locator(".toast").first.wait_for()
    await resign(page)
    await page.locator("[data-key=leave]").click()
    await page.locator("select[name=deal]").select_option("random")
    await page.locator("select[name=period]").select_option("all")
    await page.locator("input[name=assisted]").check()
    entry = page.locator(".board[data-board=blue_jacket] ol.leaderboard li", has_text="Rand")
    await entry.wait_for()
    for close in await page.locator(".toast button").all():
        await close.click()
    await screenshot(page, "lobby-leaderboards-phone", element=".solitaire-panel")
    async with page.expect_download() as download:
        await entry.locator("button.record").click()
    path = tmp_path / "record.json"
    await (await download.value).save_as(path)
    assert verify(read_record(path)) == []


COUNT_HINTS = """() => { const ctx = window.blackdrez.ctx; const toast = ctx.toast;
  window.hintsShown = 0;
  ctx.toast = (text, ...rest) => {
    toast(text, ...rest); if (text.startsWith('Hint:')) window.hintsShown++; }; }"""
TOAST_BOXES = """() => [...document.querySelectorAll('#toasts .toast')].map(t => {
  const r = t.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })"""
COVERED = """(toasts) => [...document.querySelectorAll('.card, .stat, .hinted-from, .hinted-to')]
  .filter(e => { const r = e.getBoundingClientRect();
    return r.bottom > 0 && r.top < innerHeight && toasts.some(([l, t, rr, b]) =>
      l < r.right && r.left < rr && t < r.bottom && r.top < b); })
  .map(e => e.className + ' ' + (e.dataset.card || e.textContent.slice(0, 20)))"""


async def test_toasts_are_few_and_keep_off_the_board(new_page) -> None:
    """A hint asked again does not stack a second toast; at most two show (the newest replace
    the oldest); on a desktop and on a phone they cover no card, hint or score."""
    for width, height in ((1366, 768), (390, 844)):
        page = await new_page("Sol", width=width, height=height)
        await start_deal(page, "blue_jacket", DEAL)
        await page.evaluate(COUNT_HINTS)
        for n in range(1, 4):
            await page.locator("#hint").click()
            await wait_until(page, f"window.hintsShown === {n}", timeout=30000)
        assert await page.locator("#toasts .toast").count() == 1, "the same hint, one toast"
        for n in range(4):
            await page.evaluate(f"window.blackdrez.ctx.toast('Message {n}.', 'info')")
        texts = await page.locator("#toasts .toast span").all_text_contents()
        assert texts == ["Message 2.", "Message 3."], texts
        await page.evaluate("window.blackdrez.ctx.toast('Message 2.', 'info')")
        texts = await page.locator("#toasts .toast span").all_text_contents()
        assert texts == ["Message 3.", "Message 2."], "a repeated message is not shown twice"
        long = "Hint: a long hint to read, about as long as they come."
        await page.evaluate(f"window.blackdrez.ctx.toast('{long}', 'info')")
        boxes = await page.evaluate(TOAST_BOXES)
        assert len(boxes) == 2
        assert all(b[0] >= 0 and b[2] <= width and b[1] >= 0 and b[3] <= height for b in boxes)
        assert await page.evaluate(COVERED, boxes) == [], (width, boxes)


BOX = """(selector) => { const r = document.querySelector(selector).getBoundingClientRect();
  return [r.left, r.top, r.right, r.bottom]; }"""
HIT = """(selector) => { const e = document.querySelector(selector);
  const r = e.getBoundingClientRect();
  return document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2) === e; }"""


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


async def test_a_toast_leaves_hint_and_undo_in_sight_and_within_reach(new_page, screenshot) -> None:
    """On a phone the toasts were at the bottom of the screen, where Blue Jacket's Hint and
    Undo are once the player has scrolled down to them. A toast shown then covers neither (on a
    desktop neither: the toasts are at the top there), and a tap on either reaches it."""
    for width, height, name in (
        (1280, 900, "blue-jacket-toast"),
        (390, 844, "blue-jacket-toast-phone"),
    ):
        page = await new_page("Thumb", width=width, height=height)
        await one_move_of_the_deal(page)
        await page.evaluate("document.querySelector('#undo').scrollIntoView({block: 'end'})")
        await page.locator("#hint").click()
        await page.locator(".toast", has_text="Hint:").wait_for()
        await page.evaluate("window.blackdrez.ctx.toast('A second message, as long as they come.')")
        toasts = await page.evaluate(TOAST_BOXES)
        assert len(toasts) == 2
        await screenshot(page, name, full=False)
        for button in ("#hint", "#undo"):
            box = await page.evaluate(BOX, button)
            assert box[3] <= height, f"{button} is on the screen"
            assert not any(overlap(box, toast) for toast in toasts), (width, button, box, toasts)
            assert await page.evaluate(HIT, button), f"a tap at {button}'s centre reaches it"
        before = await seq(page)
        await page.locator("#undo").click(timeout=2000)
        await page.wait_for_function(f"window.blackdrez.table().seq > {before}")
        assert await page.locator("#stat-moves").text_content() == "0"
        assert await page.locator("#toasts .toast").count() >= 1, "the messages still show"


async def test_daily_deal_pressed_again_mid_game_opens_the_game_being_played(new_page) -> None:
    """A newcomer starts the daily deal, goes back to the lobby and presses Daily deal again.
    The page said "A game is already running at this table." (in the lobby, at no table) and
    stayed there; it now opens the ranked game still being played, and says so."""
    page = await new_page("Daily")
    await page.locator("[data-start-daily=blue_jacket]").click()
    await page.locator("#stat-score").wait_for()
    table = (await table_state(page))["id"]
    await page.locator("[data-key=lobby]").click()
    await page.locator("[data-start-daily=blue_jacket]").click()
    await page.locator("#stat-score").wait_for()
    assert (await table_state(page))["id"] == table
    toast = page.locator(".toast", has_text="still being played: here it is")
    await toast.wait_for()
    assert "at this table" not in (await page.locator("#toasts").text_content() or "")


async def test_a_hint_is_withdrawn_once_a_move_is_made_or_the_game_left(new_page) -> None:
    """A hint's message stayed six seconds whatever happened: the move it named already made,
    or on the next game opened from the lobby (a Blackjack Piles hint over a Blue Jacket deal).
    It goes with its highlight, at the next move, and when the player leaves the game."""
    page = await new_page("Sol")
    await start_deal(page, "blue_jacket", DEAL)
    engine = bj.BlueJacket.new(bj.Config(), GAMES["blue_jacket"].deal_seed(DEAL))
    expected = msgspec.to_builtins(hint("blue_jacket", engine, 0))
    await page.locator("#hint").click()
    hinted = page.locator(".toast", has_text="Hint:")
    await hinted.wait_for()
    await page.locator(f"[data-loc='{expected['source']}']").click()
    await click_and_wait(page, page.locator(f"[data-loc='{expected['target']}']"))
    assert await hinted.count() == 0, "the hint after its move was made"
    await page.locator("#hint").click()
    await hinted.wait_for()
    await page.locator("[data-key=lobby]").click()
    await page.locator("#quick-join").wait_for()
    assert await hinted.count() == 0, "the hint in the lobby"


HEADER_CONTROLS = ".top a, .top button, .top input, .top summary, #status, .rename > span"
UNDER_TOASTS = """([toasts, selector]) => [...document.querySelectorAll(selector)]
  .filter(e => { const r = e.getBoundingClientRect();
    return r.width > 0 && !e.closest('#toasts') && toasts.some(([l, t, rr, b]) =>
      l < r.right && r.left < rr && t < r.bottom && r.top < b); })
  .map(e => e.tagName + ' ' + (e.getAttribute('aria-label') || e.textContent.slice(0, 20)))"""
HEADER_HEIGHT = "document.querySelector('.top').getBoundingClientRect().height"


async def test_toasts_cover_no_link_button_or_field_of_the_header(new_page, screenshot) -> None:
    """Issue 36: the messages covered the header's links ("Your games") and "Playing as". They
    now sit in the header's empty middle and grow down over the empty middle of the title row:
    on a desktop, at a BlackDrez table and in Blue Jacket, two messages cover no control of the
    header, no card, score or seat, and never make the header taller."""
    second = "window.blackdrez.ctx.toast('A second message, as long as they come.', 'info')"
    for width, height in ((1280, 800), (1366, 768)):
        page = await new_page("Thumb", width=width, height=height)
        await start_deal(page, "blue_jacket", DEAL)
        header = await page.evaluate(HEADER_HEIGHT)
        await page.locator("#hint").click()
        await page.locator(".toast", has_text="Hint:").wait_for()
        await page.evaluate(second)
        boxes = await page.evaluate(TOAST_BOXES)
        assert len(boxes) == 2
        if width == 1280:
            await screenshot(page, "blue-jacket-toast", full=False)
        assert await page.evaluate(HEADER_HEIGHT) == header, "the header keeps its height"
        selectors = HEADER_CONTROLS + ", .card, .stat, .hinted-from, .hinted-to, h2"
        assert await page.evaluate(UNDER_TOASTS, [boxes, selectors]) == [], (width, boxes)

        table = await new_page("Hostess", width=width, height=height)
        await create_table(table, "Bots and me", seats=4)
        copied = "window.blackdrez.ctx.toast('Link copied: send it to a friend.', 'info')"
        await table.evaluate(copied)
        await table.evaluate(second)
        boxes = await table.evaluate(TOAST_BOXES)
        assert len(boxes) == 2
        if width == 1280:
            await screenshot(table, "blackdrez-toast", full=False)
        selectors = HEADER_CONTROLS + ", .card, .seat, .table-head > *, .invite > *"
        assert await table.evaluate(UNDER_TOASTS, [boxes, selectors]) == [], (width, boxes)
