"""Helpers for driving the browser client: wait for the table on screen to change."""

from __future__ import annotations

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


async def click_and_wait(page: Page, target: Locator, timeout: float = 5000) -> None:
    """Click ``target`` and wait until the table on screen received the resulting events."""
    before = await seq(page)
    await target.click()
    await page.wait_for_function(f"{SEQ} > {before}", timeout=timeout)
