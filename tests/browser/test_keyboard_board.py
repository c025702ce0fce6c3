"""Blue Jacket by keyboard (issue 36): the board is one stop for Tab, the arrow keys move
between piles as they lie, and Enter picks a card and then its place (before: 30 Tabs to a
card and 21 more to its target)."""

from __future__ import annotations

from tests.browser.helpers import seq, start_deal, wait_until

FOCUSED = "document.activeElement?.dataset?.loc ?? null"
MIDDLE = """(selector) => {
  const r = (selector ? document.querySelector(selector) : document.activeElement)
    .getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
}"""


async def test_blue_jacket_is_played_with_arrows_and_enter(new_page) -> None:
    page = await new_page("Keys")
    await start_deal(page, "blue_jacket", 3)
    tabs = 0
    while await page.evaluate(FOCUSED) is None:
        await page.keyboard.press("Tab")
        tabs += 1
        assert tabs <= 25, "the board is reached by Tab"
    # the board is one stop: the next Tab leaves it
    await page.keyboard.press("Tab")
    assert await page.evaluate(FOCUSED) is None
    await page.keyboard.press("Shift+Tab")
    start = await page.evaluate(FOCUSED)
    assert start == "b1"
    await page.keyboard.press("ArrowRight")
    assert await page.evaluate(FOCUSED) == "b2"
    await page.keyboard.press("ArrowLeft")
    assert await page.evaluate(FOCUSED) == "b1"
    await page.keyboard.press("ArrowUp")
    assert (await page.evaluate(FOCUSED)).startswith("r3.")
    await page.keyboard.press("ArrowUp")
    assert (await page.evaluate(FOCUSED)).startswith("r2.")
    # a legal move, picked and placed with Enter (the focus moved there by arrows)
    legal = await page.evaluate("window.blackdrez.table().legal")
    move = next(a for a in legal if a["type"] == "move" and a["target"] != "aces")
    for loc in (move["source"], move["target"]):
        for _ in range(30):
            if await page.evaluate(FOCUSED) == loc:
                break
            here = await page.evaluate(MIDDLE, None)
            there = await page.evaluate(MIDDLE, f"[data-loc='{loc}']")
            dx, dy = there[0] - here[0], there[1] - here[1]
            if abs(dy) > 10:
                await page.keyboard.press("ArrowDown" if dy > 0 else "ArrowUp")
            else:
                await page.keyboard.press("ArrowRight" if dx > 0 else "ArrowLeft")
        assert await page.evaluate(FOCUSED) == loc, f"arrows reach {loc}"
        before = await seq(page)
        await page.keyboard.press("Enter")
        if loc == move["source"]:
            await page.locator(f"[data-loc='{loc}'][aria-pressed=true]").wait_for()
    await wait_until(page, f"window.blackdrez.table().seq > {before}")
