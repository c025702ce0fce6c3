"""A player in the browser while the default server restarts (``blackdrez serve``, no Redis
given: its state in its data folder).

The page is playing a solitaire when the server is stopped (SIGTERM, as an upgrade does, then a
SIGKILL, as a crash does) and started again in the same folder: the page must reconnect by itself
within a few seconds of the server's return, as the same player, with the session exactly where
it was, and play on.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blackdrez.server.testing.default_server import DefaultServer
from blackdrez.server.testing.redis_server import free_port
from tests.browser.helpers import click_and_wait, start_deal, table_state, wait_until
from tests.browser.test_sign_out import sign_up

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.alone,  # (its bound on the page's return: no other Chromium beside it)
]

DOWN = 5.0
"""Seconds the server stays down (backing off exponentially, a page would try again only some
seconds after the server is back: measured 10.7 s once)."""
BACK_WITHIN = 3.0
"""Seconds from the server's return (it listens again) until the page is playing again: the
page tries every half second or so once the server said it was restarting, and at most 2 s
apart after a crash (it said nothing)."""


@pytest.fixture
async def default_server(tmp_path: Path) -> AsyncIterator[DefaultServer]:
    server = DefaultServer(tmp_path, free_port())
    await server.start()
    yield server
    if server.process is not None and server.process.poll() is None:
        await asyncio.to_thread(server.stop, signal.SIGTERM)


@pytest.fixture
def base_url(default_server: DefaultServer) -> str:
    return default_server.http_url


async def test_a_solitaire_in_the_browser_goes_on_across_restarts_of_the_default_server(
    default_server: DefaultServer, new_page
) -> None:
    page = await new_page("Ann", width=390, height=844)
    player = await page.evaluate("window.blackdrez.conn.welcome.player")
    await start_deal(page, "blue_jacket", 7)
    await click_and_wait(page, page.locator("#stock"))
    before = await table_state(page)
    for how in (signal.SIGTERM, signal.SIGKILL):
        await asyncio.to_thread(default_server.stop, how)
        await wait_until(page, "document.querySelector('#status').dataset.state !== 'open'")
        await asyncio.sleep(DOWN)  # an upgrade: the new version installs
        await default_server.start()
        back = time.monotonic()
        await wait_until(page, "document.querySelector('#status').dataset.state === 'open'", 15000)
        await wait_until(page, f"window.blackdrez.table()?.seq >= {before['seq']}", 15000)
        took = time.monotonic() - back
        print(f"{how.name}: playing again {took:.2f} s after the return")
        assert took < BACK_WITHIN, f"playing again {took:.1f} s after the server's return"
        assert await page.evaluate("window.blackdrez.conn.welcome.player") == player
        after = await table_state(page)
        assert (after["id"], after["view"]) == (before["id"], before["view"]), how.name
        await click_and_wait(page, page.locator("#stock"))  # and it plays on
        before = await table_state(page)


async def test_an_account_stays_signed_in_and_in_its_place_across_a_restart(
    default_server: DefaultServer, new_page
) -> None:
    """Restarting the default server signed an account out (it came back a new guest) and took
    10.7 s to reconnect: the account, its name and the page's place (its address) come back."""
    page = await new_page("Cleo")
    player = await sign_up(page, "Cleo Keeps", "a long enough secret")
    await page.locator(".top h1 a").click()  # the lobby
    await start_deal(page, "blackjack_piles", 5)
    address = page.url
    await asyncio.to_thread(default_server.stop, signal.SIGTERM)
    await wait_until(page, "document.querySelector('#status').dataset.state !== 'open'")
    await asyncio.sleep(DOWN)
    await default_server.start()
    back = time.monotonic()
    await wait_until(page, "document.querySelector('#status').dataset.state === 'open'", 15000)
    await page.locator("#stat-score").wait_for()
    took = time.monotonic() - back
    assert took < BACK_WITHIN, f"back {took:.1f} s after the server's return"
    assert await page.evaluate("window.blackdrez.conn.welcome.player") == player
    assert await page.locator("#whoami").text_content() == "Cleo Keeps"
    assert await page.locator("#account-link").text_content() == "Profile"
    assert page.url == address
    await page.reload()  # and a reload after the restart too
    await page.locator("#stat-score").wait_for()
    assert await page.locator("#account-link").text_content() == "Profile"
