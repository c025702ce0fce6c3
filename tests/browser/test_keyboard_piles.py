"""Blackjack Piles by keyboard, as Blue Jacket: the piles are one stop for Tab (after the
stock's card), the arrow keys move between the stock and the piles as they lie on screen, and
Enter or Space does what a click does on the focused place (select a card, place the stock's
card, cash a hand). The focus stays on the same place when the board is drawn again."""

from __future__ import annotations

from playwright.async_api import Page

from tests.browser.helpers import seq, start_deal, wait_until

DEAL = 7
FOCUSED = "document.activeElement?.dataset?.key ?? null"
IN_BOARD = "!!document.activeElement?.closest('.board')"
MIDDLE = """(selector) => {
  const r = (selector ? document.querySelector(selector) : document.activeElement)
    .getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
}"""
TABLE = "(() => { const t = window.blackdrez.table(); return { view: t.view, legal: t.legal }; })()"


async def focused(page: Page) -> str | None:
    return await page.evaluate(FOCUSED)


async def go_to(page: Page, key: str) -> None:
    """Move the focus to the place ``key`` with the arrow keys only."""
    for _ in range(30):
        if await focused(page) == key:
            return
        here = await page.evaluate(MIDDLE, None)
        there = await page.evaluate(MIDDLE, f".board [data-key='{key}']")
        dx, dy = there[0] - here[0], there[1] - here[1]
        across = "ArrowRight" if dx > 0 else "ArrowLeft"
        down = "ArrowDown" if dy > 0 else "ArrowUp"
        arrows = [across, down] if abs(dx) >= abs(dy) else [down, across]
        was = await focused(page)
        for arrow in arrows:  # the main direction first; if nothing lies there, the other
            await page.keyboard.press(arrow)
            if await focused(page) != was:
                break
    assert await focused(page) == key, f"arrows reach {key}"


async def enter_and_wait(page: Page, key: str = "Enter") -> None:
    before = await seq(page)
    await page.keyboard.press(key)
    await wait_until(page, f"window.blackdrez.table().seq > {before}")


async def tab_to_piles(page: Page) -> None:
    """Tab from the top of the page to the stock's card, then once more to the piles."""
    tabs = 0
    while await focused(page) != "stock":
        await page.keyboard.press("Tab")
        tabs += 1
        assert tabs <= 40, "the stock's card is reached by Tab"
    await page.keyboard.press("Tab")
    assert await focused(page) == "pile-0", "the next stop is the piles, the first at first"


async def place_by_keys(page: Page, pile: int) -> None:
    """Place the stock's card on ``pile`` with arrows and Enter (an empty pile, or the pile's
    Place button), checking the view changed as the legal action said."""
    state = await page.evaluate(TABLE)
    assert {"type": "place", "pile": pile} in state["legal"]
    card = state["view"]["stock_top"]
    height = len(state["view"]["piles"][pile])
    key = f"place-{pile}" if height else f"pile-{pile}"
    await go_to(page, key)
    await enter_and_wait(page)
    after = (await page.evaluate(TABLE))["view"]
    assert after["piles"][pile] == [*state["view"]["piles"][pile], card]
    shown = page.locator(f".pile-column[data-pile='{pile}'] button.card")
    assert await shown.get_attribute("data-card") == card
    assert await focused(page) == key, "the focus stays where it was"


async def test_blackjack_piles_is_played_with_arrows_and_enter(new_page) -> None:
    page = await new_page("Keys")
    await start_deal(page, "blackjack_piles", DEAL)
    await tab_to_piles(page)
    # the piles are one stop: the next Tab leaves the board, Shift+Tab comes back to it
    await page.keyboard.press("Tab")
    assert not await page.evaluate(IN_BOARD), "one Tab stop for the piles"
    await page.keyboard.press("Shift+Tab")
    assert await focused(page) == "pile-0"
    stops = page.locator(".board button:not([tabindex='-1'])")
    assert await stops.count() == 2, "the stock and one pile"
    await page.keyboard.press("ArrowRight")
    assert await focused(page) == "pile-1"
    await page.keyboard.press("ArrowRight")
    assert await focused(page) == "pile-2"
    await page.keyboard.press("ArrowLeft")
    assert await focused(page) == "pile-1"
    await page.keyboard.press("ArrowLeft")
    await page.keyboard.press("ArrowLeft")
    assert await focused(page) == "stock", "the stock's card lies left of the piles"
    await page.keyboard.press("ArrowRight")
    assert await focused(page) == "pile-0"
    # the accessible names say what each place is
    label = await page.locator(".board [data-key='pile-2']").get_attribute("aria-label")
    assert label and label.startswith("Pile 3, empty: place the "), label

    # Enter on an empty pile places the stock's card there; on a pile, its Place button does.
    await place_by_keys(page, 2)
    await page.keyboard.press("Tab")  # the Tab stop follows the focus
    await page.keyboard.press("Shift+Tab")
    assert await focused(page) == "pile-2"
    await place_by_keys(page, 2)
    await page.keyboard.press("ArrowDown")
    assert await focused(page) == "pile-2"
    label = await page.locator(".board [data-key='pile-2']").get_attribute("aria-label")
    assert label and label.startswith("Pile 3, top card "), label

    # Space selects the focused card for a hand (as a click), Escape and the number keys still work
    top = page.locator(".pile-column[data-pile='2'] button.card")
    before = await seq(page)
    await page.keyboard.press("Space")
    assert await top.get_attribute("aria-pressed") == "true"
    assert await focused(page) == "pile-2", "the focus stays on the selected card"
    await page.keyboard.press("Escape")
    assert await top.get_attribute("aria-pressed") == "false"
    await page.keyboard.press("Digit3")
    assert await top.get_attribute("aria-pressed") == "true"
    await page.keyboard.press("Escape")
    assert await seq(page) == before

    # Play on by keys only until a hand of 21 is cashed with Enter on each of its cards.
    for _ in range(25):
        state = await page.evaluate(TABLE)
        cash = next((a for a in state["legal"] if a["type"] == "cash"), None)
        if cash is None:
            piles = state["view"]["piles"]
            places = [a["pile"] for a in state["legal"] if a["type"] == "place"]
            await place_by_keys(page, min(places, key=lambda p: (len(piles[p]) > 0, len(piles[p]))))
            continue
        keys = [f"pile-{p}" for p in cash["piles"]] + (["stock"] if cash["stock"] else [])
        for key in keys[:-1]:
            await go_to(page, key)
            await page.keyboard.press("Enter")
            await page.locator(f".board [data-key='{key}'][aria-pressed=true]").wait_for()
        await go_to(page, keys[-1])
        await enter_and_wait(page)
        view = (await page.evaluate(TABLE))["view"]
        assert view["hands"] == state["view"]["hands"] + 1
        assert await page.locator("#stat-hands").text_content() == str(view["hands"])
        assert await page.evaluate(IN_BOARD), "the focus stays on the board"
        break
    else:
        raise AssertionError("no hand to cash")


async def test_blackjack_piles_arrows_on_a_phone(new_page) -> None:
    page = await new_page("Phone", width=390, height=844)
    await start_deal(page, "blackjack_piles", DEAL)
    await tab_to_piles(page)
    await page.keyboard.press("ArrowRight")
    assert await focused(page) == "pile-1"
    await page.keyboard.press("ArrowLeft")
    assert await focused(page) == "pile-0"
    await page.keyboard.press("ArrowUp")
    assert await focused(page) == "stock", "on a phone the stock's card lies above the piles"
    await page.keyboard.press("ArrowDown")
    assert (await focused(page) or "").startswith("pile-")
    await place_by_keys(page, 4)
    await place_by_keys(page, 4)
    await page.keyboard.press("ArrowLeft")
    assert await focused(page) == "pile-3", "from a Place button to the empty pile beside it"
