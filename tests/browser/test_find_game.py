"""Find a game in the browser (matchmaking): two players who ask for a casual table of two are
seated together at a table that is playing, each taken to its address; a player who lets bots fill
in after a second gets a table with bots; a search survives a reload with its place kept, and once
cancelled it is gone: a second searcher is not matched with it."""

from __future__ import annotations

import asyncio
import re

from playwright.async_api import Page

from tests.browser.helpers import no_sideways_scroll, wait_until

TABLE_URL = re.compile(r"#/table/([^/#?]+)$")
PATIENCE_MS = 20_000  # a matched table with bots starts once they sit (up to 10 s)
SEARCH = "JSON.parse(sessionStorage.getItem('blackdrez.find') || 'null')"
ANNOUNCED = "document.getElementById('announce').textContent"


def table_in(url: str) -> str | None:
    found = TABLE_URL.search(url)
    return found.group(1) if found else None


async def find_game(
    page: Page,
    seats: str,
    bots_after: int | None = None,
    rated: bool = False,
    matched_at_once: bool = False,
) -> None:
    """Choose ``seats`` (a number, or "any"), a casual table unless ``rated``, and press Find
    a game: the search shows in the panel (unless ``matched_at_once``: someone waits for just
    this search, and the panel may go to the table before the search is ever seen)."""
    form = page.locator("#find")
    await form.get_by_label("Seats").select_option(seats)
    await form.get_by_label("Rated" if rated else "Casual").check()
    if bots_after is not None:
        await form.get_by_label("Let bots fill in after").check()
        await form.get_by_label("Seconds before bots fill in").fill(str(bots_after))
    await form.get_by_role("button", name="Find a game").click()
    if not matched_at_once:
        await page.locator(".find-status").wait_for()


async def queued(page: Page) -> None:
    """Wait until the server answered the search (its figures show)."""
    await page.locator(".find-waiting", has_text="searching").wait_for()


COVERED_CONTROLS = """() => {
    const boxes = [...document.querySelectorAll('#toasts .toast')]
        .map(t => t.getBoundingClientRect());
    return [...document.querySelectorAll('.action-bar button')].filter(b => {
        const r = b.getBoundingClientRect();
        return boxes.some(t => r.left < t.right && t.left < r.right
            && r.top < t.bottom && t.top < r.bottom);
    }).map(b => b.textContent);
}"""
"""The action bar's buttons a toast lies over."""


async def test_two_players_who_find_a_game_of_two_play_at_one_table(new_page, screenshot) -> None:
    ann = await new_page("Ann", width=1280, height=800)
    bob = await new_page("Bob", width=390, height=844)
    for page in (ann, bob):
        page.set_default_timeout(PATIENCE_MS)
    for page in (ann, bob):
        await page.locator("#find-game").wait_for()
    await screenshot(ann, "find-form", full=False)
    await screenshot(bob, "find-form-phone", full=False)
    await find_game(ann, "2")
    await queued(ann)
    assert await ann.locator(".find-choices").text_content() == "Casual · 2 seats · no bots"
    await ann.locator(".find-band", has_text="everyone counts as 1500").wait_for()
    await ann.locator(".find-waiting", has_text="Only you are searching").wait_for()
    await wait_until(ann, "document.querySelector('.find-clock').textContent !== '0:00'", 5000)
    assert re.fullmatch(r"0:0\d", await ann.locator(".find-clock").text_content() or "")
    assert await ann.evaluate("document.activeElement.id") == "find-cancel"
    await screenshot(ann, "find-searching", full=False)

    await find_game(bob, "2", matched_at_once=True)
    for page, other in ((ann, "Bob"), (bob, "Ann")):
        # said first (shown, and to screen readers), then the table opens
        await page.locator(".toast", has_text=f"Table found: you and {other} — waited").wait_for()
        await wait_until(page, f"{ANNOUNCED}.startsWith('Table found: you and {other}')")
    for page in (ann, bob):
        await page.locator(".blackdrez .seat.mine").wait_for()
    table = table_in(ann.url)
    assert table is not None and table_in(bob.url) == table, (ann.url, bob.url)
    for page, other in ((ann, "Bob"), (bob, "Ann")):
        await page.locator(".blackdrez .seat", has_text=other).wait_for()
        assert await page.locator(".blackdrez .seat").count() == 2
        await wait_until(page, "window.blackdrez.table()?.info?.status === 'playing'")
        assert await page.evaluate(SEARCH) is None
    assert "Casual table of 2" in (await ann.locator(".table-head h2").text_content() or "")
    await screenshot(ann, "find-found", full=False)
    await screenshot(bob, "find-found-phone", full=False)
    # the news covers none of the game's controls (it hid Hit and Stand on a phone, once)
    for page in (ann, bob):
        covered = await page.evaluate(COVERED_CONTROLS)
        assert covered == [], covered
    await no_sideways_scroll(bob, 390)
    # Back: the lobby, with the form again (the search is over)
    await ann.go_back()
    await ann.locator("#find-game").wait_for()
    assert await ann.locator(".find-status").count() == 0


async def test_bots_fill_in_after_the_seconds_chosen(new_page, screenshot) -> None:
    cy = await new_page("Cy", width=390, height=844)
    cy.set_default_timeout(PATIENCE_MS)
    await find_game(cy, "3", bots_after=1)
    assert await cy.locator(".find-choices").text_content() == "Casual · 3 seats · bots after 1 s"
    await cy.locator(".blackdrez .seat.mine").wait_for()
    assert table_in(cy.url) is not None
    await cy.locator(".toast", has_text="Table found: you and 2 bots — waited").wait_for()
    await wait_until(
        cy, "document.querySelectorAll('.blackdrez .seat .badge.bot').length === 2", 15000
    )
    await wait_until(cy, "window.blackdrez.table()?.info?.status === 'playing'", 15000)
    await screenshot(cy, "find-bots-phone", full=False)
    await no_sideways_scroll(cy, 390)


async def test_a_search_survives_a_reload_and_once_cancelled_matches_nobody(
    new_page, screenshot
) -> None:
    ann = await new_page("Ann", width=390, height=844)
    ann.set_default_timeout(PATIENCE_MS)
    await find_game(ann, "2")
    await queued(ann)
    since = (await ann.evaluate(SEARCH))["since"]
    await ann.reload()
    await ann.locator(".find-status").wait_for()
    await queued(ann)
    assert (await ann.evaluate(SEARCH))["since"] == since, "the place is kept"
    await ann.locator(".find-status").scroll_into_view_if_needed()
    await screenshot(ann, "find-searching-phone", full=False)
    await no_sideways_scroll(ann, 390)

    await ann.get_by_role("button", name="Cancel").click()
    await ann.locator("#find-game").wait_for()
    assert await ann.locator(".find-status").count() == 0
    assert await ann.evaluate(SEARCH) is None
    assert await ann.evaluate("document.activeElement.id") == "find-game"
    # The form keeps the choices of the search
    assert await ann.locator("#find select[name=seats]").input_value() == "2"

    bob = await new_page("Bob", width=1280, height=800)
    await find_game(bob, "2")
    await queued(bob)
    await asyncio.sleep(2)
    await bob.locator(".find-waiting", has_text="Only you are searching").wait_for()
    assert await bob.locator(".find-status").count() == 1, "Bob still searches"
    assert await ann.locator(".blackdrez").count() == 0 and table_in(ann.url) is None
    assert table_in(bob.url) is None
    await bob.get_by_role("button", name="Cancel").click()
    await bob.locator("#find-game").wait_for()


async def test_a_rated_search_shows_the_rating_and_a_band_that_widens(new_page, screenshot) -> None:
    dee = await new_page("Dee", width=1280, height=800)
    dee.set_default_timeout(PATIENCE_MS)
    await find_game(dee, "any", rated=True)
    await queued(dee)
    assert await dee.locator(".find-choices").text_content() == "Rated · any size · no bots"
    band = re.compile(r"Your rating 1500: players within ±(\d+) points")
    widths = []
    for _ in range(2):
        await asyncio.sleep(1.2)
        text = await dee.locator(".find-band").text_content() or ""
        found = band.fullmatch(text)
        assert found, text
        widths.append(int(found.group(1)))
    # 100 points at first, 25 more each second (see queued.band and queued.widen)
    assert 100 < widths[0] < widths[1] <= 100 + 25 * 10, widths
    await screenshot(dee, "find-searching-rated", element=".find-panel")
    await dee.get_by_role("button", name="Cancel").click()
    await dee.locator("#find-game").wait_for()
    assert await dee.locator("#find input[value=rated]").is_checked()
