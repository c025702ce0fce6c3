"""Helpers for driving the browser client: create a table, play a turn, wait for the table on
screen to change."""

from __future__ import annotations

import asyncio
from typing import Any

from playwright.async_api import Locator, Page

SEQ = "(() => { const t = window.blackdrez.table(); return t ? t.seq : -1; })()"


async def seq(page: Page) -> int:
    """The last event number the client holds for the table on screen."""
    return int(await page.evaluate(SEQ))


async def table_state(page: Page) -> dict[str, Any]:
    """The client's state of the table on screen (seat, view, legal)."""
    return await page.evaluate(
        "(() => { const t = window.blackdrez.table();"
        " return t && { id: t.id, seq: t.seq, seat: t.seat, view: t.view, legal: t.legal }; })()"
    )


async def wait_until(page: Page, expression: str, timeout: float = 5000) -> None:
    """Wait until the JavaScript ``expression`` is true on ``page`` (timeout in ms). It polls
    with ``evaluate``, which the page's Content-Security-Policy does not apply to, where
    Playwright's ``wait_for_function`` evaluates its predicate with eval once its first check
    fails: the policy forbids that."""
    deadline = asyncio.get_running_loop().time() + timeout / 1000
    while not await page.evaluate(f"!!({expression})"):
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} ms for {expression}")
        await asyncio.sleep(0.02)


async def click_and_wait(page: Page, target: Locator, timeout: float = 5000) -> None:
    """Click ``target`` and wait until the table on screen received the resulting events."""
    before = await seq(page)
    await target.click()
    await wait_until(page, f"{SEQ} > {before}", timeout=timeout)


async def create_table(
    page: Page,
    name: str,
    seats: int = 3,
    max_rounds: int | None = 2,
    private: bool = False,
    pause: float = 0.3,
    turn_seconds: int = 30,
    rated: bool = False,
) -> None:
    """Fill the lobby's create form and open the new table."""
    form = page.locator("#create")
    await form.locator("input[name=name]").fill(name)
    if private:
        await form.locator("input[name=private]").check()
    if rated:
        await form.locator("input[name=rated]").check()
    await form.locator("input[name=seats]").fill(str(seats))
    await form.locator("input[name=max_rounds]").fill("" if max_rounds is None else str(max_rounds))
    await form.locator("input[name=round_pause_seconds]").fill(str(pause))
    await form.locator("input[name=turn_seconds]").fill(str(turn_seconds))
    await form.get_by_role("button", name="Create table").click()
    await page.locator(".blackdrez").wait_for()


async def my_value(page: Page) -> int:
    """The value of the hand in the viewer's own seat."""
    text = await page.locator(".seat.mine .value strong").text_content()
    return int(text or 0)


async def play_turn(page: Page) -> bool:
    """If it is this page's turn, play the simple policy by clicking; return whether it acted."""
    hit, stand, withdraw = (page.locator(s) for s in ("#hit", "#stand", "#withdraw"))
    if not await withdraw.is_enabled():
        return False
    value = await my_value(page)
    if value < 8 and await hit.is_enabled():
        button = hit
    elif await stand.is_enabled():
        button = stand
    else:
        button = withdraw
    await click_and_wait(page, button)
    return True


async def page_on_turn(*pages: Page) -> Page:
    """The page whose player is on turn (waiting up to five seconds for one)."""
    for _ in range(100):
        for page in pages:
            if await page.locator("#withdraw").is_enabled():
                return page
        await asyncio.sleep(0.05)
    raise AssertionError("nobody is on turn")


async def settled(page: Page) -> None:
    """Wait until no card is moving (before a screenshot or a bounding box); the timer bars
    (a transition every quarter second, the pause between rounds) do not count."""
    await page.wait_for_function(
        "document.getAnimations().filter(a => !(a instanceof CSSTransition)"
        " && !(a instanceof CSSAnimation)).length === 0",
        timeout=10000,
    )


async def start_deal(page: Page, game: str, deal: int) -> None:
    """Start ``game``'s numbered deal ``deal`` from the lobby's solitaire menu."""
    form = page.locator(f"form.solitaire[data-game={game}]")
    await form.locator("input[name=deal]").fill(str(deal))
    await form.get_by_role("button", name="Play deal").click()
    await page.locator("#stat-score").wait_for()
