"""Helpers for driving the browser client: create a table, play a turn, wait for the table on
screen to change."""

from __future__ import annotations

import asyncio
from typing import Any

from playwright.async_api import Locator, Page

SEQ = "(() => { const t = window.blackdrez.table(); return t ? t.seq : -1; })()"
ASIDE = ("presence", "said")
"""Events a click does not make: someone came or went, someone talked. They number the table's
events like the rest (after a server's restart, the player's presence comes in just after the
snapshot), so a wait for *any* event after a click can end on one of them, the click's own result
still on its way."""


def answered(before: int) -> str:
    """A JavaScript expression true once the table on screen holds an event after ``before`` that
    a click makes (a move, a seat taken, a game started: not a presence or a chat line)."""
    aside = ", ".join(f"'{kind}'" for kind in ASIDE)
    return (
        "(() => { const t = window.blackdrez.table();"
        f" return !!t && t.seq > {before}"
        f" && t.log.some((n) => n.seq > {before} && ![{aside}].includes(n.event.type)); }})()"
    )


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
    await wait_until(page, answered(before), timeout=timeout)


async def click_move_and_wait(page: Page, target: Locator, timeout: float = 5000) -> None:
    """:func:`click_and_wait` for a move the page may ask about first (a Blue Jacket move
    that empties a row pile with no starter in play): the question, if asked, answered yes."""
    before = await seq(page)
    await target.click()
    asked = "document.querySelector('dialog.ask') !== null"
    await wait_until(page, f"{answered(before)} || {asked}", timeout=timeout)
    if await page.locator("dialog.ask").count():
        await page.locator("dialog.ask #ask-yes").click()
        await wait_until(page, answered(before), timeout=timeout)


async def answer(page: Page, yes: bool = True) -> None:
    """Answer the question the page asks in its own dialog (``ask.js``: Leave, Resign, a new
    name), and wait until it is gone."""
    dialog = page.locator("dialog.ask")
    await dialog.wait_for()
    await dialog.locator("#ask-yes" if yes else "#ask-no").click()
    await dialog.wait_for(state="detached")


async def resign(page: Page) -> None:
    """Resign the solitaire on screen (its question answered) and wait for the result."""
    await page.locator("#resign").click()
    await click_and_wait(page, page.locator("dialog.ask #ask-yes"))


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


LOW_CONTRAST = r"""(root) => {
  // Every visible text whose colour is too close to the background behind it: WCAG's contrast
  // ratio under 4.5 (text below 18.66 px bold / 24 px), under 3 for large text.
  const rgb = (c) => (c.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const behind = (el) => {  // the colours behind el: its first opaque one, or a gradient's
    for (let e = el; e; e = e.parentElement) {
      const style = getComputedStyle(e);
      const c = rgb(style.backgroundColor);
      if (c.length >= 3 && (c.length < 4 || c[3] > 0.9)) return [c];
      const image = style.backgroundImage;
      if (image.includes("url(")) return null; // a picture: not judged
      if (image.includes("gradient")) return (image.match(/rgba?\([^)]*\)/g) || []).map(rgb);
    }
    return [[255, 255, 255]];
  };
  const low = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || !el.checkVisibility()) continue;
    if (el.closest(":disabled, [aria-disabled=true]")) continue; // WCAG exempts a disabled control
    const style = getComputedStyle(el);
    const backgrounds = behind(el);
    if (!backgrounds || !backgrounds.length || parseFloat(style.opacity) < 0.9) continue;
    const a = lum(rgb(style.color));
    const ratio = Math.min(...backgrounds.map((bg) => {
      const b = lum(bg);
      return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    }));
    const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    const what = `${n.textContent.trim().slice(0, 30)} (${el.className || el.tagName})`;
    if (ratio < need) low.push(`${what}: ${ratio.toFixed(2)}`);
  }
  return low;
}"""
"""A page function: the visible texts of ``root`` whose contrast with their background is
under WCAG AA's (``await page.evaluate(LOW_CONTRAST, element_handle)``)."""


async def no_sideways_scroll(page: Page, width: int) -> None:
    """Nothing on the page is wider than the screen (``width`` px): no sideways scrolling."""
    assert await page.evaluate("document.documentElement.scrollWidth") <= width
