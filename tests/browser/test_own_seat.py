"""The player's own seat stays in view (issue 36): at 1280x800 it was half hidden under the
sticky action bar, at a full table on the player's turn and under the game-over panel (which
makes the felt taller). On every turn of theirs the whole seat is on the screen and above the
action bar, on a phone too; at the game's end the result is in view, and on a wide screen the
seat as well."""

from __future__ import annotations

import asyncio
import time

from tests.browser.helpers import create_table, play_turn
from tests.browser.test_table_ux import add_bots

MEASURE = """() => {
  const seat = document.querySelector('.seat.mine').getBoundingClientRect();
  const bar = document.querySelector('.action-bar').getBoundingClientRect();
  const sticky = getComputedStyle(document.querySelector('.action-bar')).position === 'sticky';
  const t = window.blackdrez.table();
  return { top: seat.top, bottom: seat.bottom, bar: sticky ? bar.top : innerHeight,
    mine: (t.legal ?? []).length > 0, over: !!document.querySelector('.game-over'),
    panel: document.querySelector('.game-over')?.getBoundingClientRect().top ?? null };
}"""


SCROLL_AWAY = """() => { if (!(window.blackdrez.table().legal ?? []).length
  && !document.querySelector('.game-over'))
  window.scrollTo(0, document.body.scrollHeight); }"""
"""The player scrolls away while the others play: not once the game is over (the page has
brought the result into view: scrolling away then undid it, and the full suite saw the panel
158 px above the screen)."""


def hidden(m: dict) -> bool:
    return m["top"] < 0 or m["bottom"] > m["bar"]


async def test_the_own_seat_is_in_view_on_each_turn_and_at_the_end(new_page) -> None:
    turns = 0
    for width, height, seats in ((1280, 800, 8), (1280, 800, 4), (390, 844, 4)):
        page = await new_page("Me", width=width, height=height)
        await create_table(page, "Seat view", seats=seats, max_rounds=3, pause=1.0)
        await add_bots(page, seats - 1)
        await page.locator("#start").click()
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, "the game did not end in time"
            m = await page.evaluate(MEASURE)
            if m["over"]:
                await asyncio.sleep(0.3)  # the panel brought into view
                m = await page.evaluate(MEASURE)
                assert 0 <= m["panel"] < m["bar"], (width, seats, "the result in view", m)
                if width > 700:  # (a phone's screen holds the panel, not both)
                    assert not hidden(m), (width, seats, "at the end", m)
                break
            if m["mine"]:
                turns += 1
                assert not hidden(m), (width, seats, "on a turn", m)
                await play_turn(page)
            else:
                # The player scrolls away (to the log) while the others play.
                # (at once, and only if the turn has not come meanwhile: the page's own
                # scroll at the turn's start is not undone by the test)
                await page.evaluate(SCROLL_AWAY)
                await asyncio.sleep(0.05)
    # (a round can be won on the deal: a game may pass without a turn, not all three in a row)
    assert turns >= 1, "the player had a turn"
