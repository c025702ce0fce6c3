"""Smaller things a player met (issue 36): a table made without a name is called the same in
the lobby and at the table; a Join that is off says why; the host has Start game and no Ready
of their own; questions are asked in the page, not with the browser's confirm()."""

from __future__ import annotations

import re

from tests.browser.helpers import answer, create_table
from tests.browser.test_table_ux import add_bots, play_to_the_end


async def test_a_table_without_a_name_is_its_hosts_table_in_the_lobby_and_at_the_table(
    new_page,
) -> None:
    host = await new_page("Ada")
    form = host.locator("#create")
    await form.locator("input[name=name]").fill("")
    await form.get_by_role("button", name="Create table").click()
    await host.locator(".blackdrez").wait_for()
    assert await host.locator(".table-head h2").text_content() == "Ada\u2019s table"
    visitor = await new_page("Bea")
    row = visitor.locator(".table-row", has_text="Ada\u2019s table")
    await row.wait_for()
    assert await visitor.locator(".table-row", has_text="Unnamed").count() == 0


async def test_a_full_table_says_why_join_is_off_and_the_host_has_no_ready(new_page) -> None:
    host = await new_page("Hostess")
    form = host.locator("#create")
    await form.locator("input[name=name]").fill("Two only")
    await form.locator("input[name=seats]").fill("2")
    await form.get_by_role("button", name="Create table").click()
    await host.locator(".blackdrez").wait_for()
    assert await host.locator("#ready").count() == 0  # the host's Start game starts them
    assert await host.locator("#start").count() == 1
    await add_bots(host, 1)
    visitor = await new_page("Late")
    row = visitor.locator(".table-row", has_text="Two only")
    await row.locator(".why", has_text="Full").wait_for()
    join = row.get_by_role("button", name="Join")
    assert await join.is_disabled()
    assert "Every seat is taken" in (await join.get_attribute("title") or "")


async def test_questions_are_asked_in_the_page_and_no_keeps_the_seat(new_page) -> None:
    page = await new_page("Asker", width=390, height=844)
    native: list[str] = []
    page.on("dialog", lambda dialog: native.append(dialog.message))
    form = page.locator("#create")
    await form.locator("input[name=name]").fill("Ask me")
    await form.locator("input[name=seats]").fill("2")
    await form.get_by_role("button", name="Create table").click()
    await page.locator(".blackdrez").wait_for()
    await add_bots(page, 1)
    await page.locator("#start").click()
    await page.locator(".seat.mine .hand .card").first.wait_for()
    await page.locator("#leave").click()
    dialog = page.locator("dialog.ask")
    await dialog.wait_for()
    assert await dialog.get_by_role("button", name="Stay").is_visible()
    box = await dialog.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    await answer(page, yes=False)
    assert await page.locator(".blackdrez .seat.mine").count() == 1
    assert native == []


async def test_the_game_over_panel_says_the_last_rounds_result_first(new_page) -> None:
    """The last round's result was replaced at once by the game-over panel: the panel now
    opens with it, then who won the game."""
    page = await new_page("Ender", width=390, height=844)
    await create_table(page, "One round", seats=2, max_rounds=1, pause=0.3)
    await add_bots(page, 1)
    await page.locator("#start").click()
    await play_to_the_end(page)
    line = page.locator(".game-over #last-round")
    await line.wait_for()
    assert re.fullmatch(
        r"Last round: (.+ wins round 1.*|Round 1 is shared: .+)\.", await line.text_content() or ""
    )
    order = await page.evaluate(
        "[...document.querySelector('.game-over').children].map((e) => e.id || e.className)"
    )
    assert order.index("last-round") < order.index("headline")
