"""Every text of the main screens reads against what is behind it, in each theme: WCAG AA's
contrast (4.5:1, 3:1 for large text; a disabled control is exempt). The dark theme's green
buttons had white text at 4.0:1 and its "seed revealed" 3.9:1 on the paper."""

from __future__ import annotations

import pytest

from tests.browser.helpers import LOW_CONTRAST, create_table, resign, start_deal
from tests.browser.test_table_ux import add_bots


@pytest.mark.parametrize("theme", ["light", "dark", "contrast"])
async def test_the_main_screens_read_in_every_theme(new_page, theme: str) -> None:
    page = await new_page("Reader", width=1280, height=900)
    if theme != "light":
        await page.locator(".settings-menu summary").click()
        await page.locator("#theme").select_option(theme)
        await page.locator(".settings-menu summary").click()
    low: dict[str, list[str]] = {}

    async def look(screen: str) -> None:
        found = await page.evaluate(LOW_CONTRAST, await page.query_selector("body"))
        if found:
            low[screen] = found

    await look("lobby")
    await start_deal(page, "blackjack_piles", 7)
    await look("blackjack piles")
    await resign(page)
    await look("blackjack piles, over")
    await page.get_by_role("button", name="Back to lobby").click()
    await start_deal(page, "blue_jacket", 1)
    await look("blue jacket")
    await resign(page)
    await page.locator(".revealed").wait_for()
    await look("blue jacket, over")
    await page.get_by_role("button", name="Back to lobby").click()
    await create_table(page, "Contrast", seats=2)
    await add_bots(page, 1)
    await look("blackdrez, waiting")
    assert low == {}, low
