"""The page while the connection or the store is lost: the reconnection countdown counts down, a
table the store lost leaves for the lobby and says so, and the header says when the server cannot
save moves (its store cannot be reached) until it can again."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import pytest
import redis
from playwright.async_api import Page

from blackdrez.clients.bots import run_bot
from blackdrez.server.app import GameServer, Settings
from tests.browser.helpers import create_table, wait_until
from tests.browser.test_table_ux import add_bots
from tests.server.helpers import RedisUser, redis_user, wait_for

BADGE = "document.getElementById('status')"


@pytest.fixture
async def store_user(redis_url_clean: str) -> AsyncIterator[RedisUser]:
    """The node's own Redis user: the test cuts the node off its store with it."""
    async with redis_user(redis_url_clean, "browser-node") as user:
        yield user


@pytest.fixture
async def server(store_user: RedisUser) -> AsyncIterator[GameServer]:
    """One node on a real Redis (the session's, emptied), through its own user."""
    settings = Settings(port=0, ping_interval=None, redis_url=store_user.url, node_id="a")
    game_server = GameServer(settings, bot_client=run_bot)
    await game_server.start()
    yield game_server
    await game_server.stop()


async def badge(page: Page) -> str:
    return str(await page.evaluate(f"{BADGE}.textContent"))


async def test_the_reconnection_countdown_counts_down_and_stops_once_connected(
    new_page,
) -> None:
    """Before, "Reconnecting in 3.0 s…" was written once per attempt and stood still."""
    page = await new_page("Waiter")
    await page.evaluate(
        "(() => { const c = window.blackdrez.conn; c.delay = 3000; c.ws.close(); })()"
    )
    await wait_until(page, f"{BADGE}.dataset.state === 'waiting'")
    seconds = re.compile(r"Reconnecting in (\d+(?:\.\d)?) s…")
    first = seconds.fullmatch(await badge(page))
    assert first, await badge(page)
    await asyncio.sleep(0.8)
    later = seconds.fullmatch(await badge(page))
    assert later, await badge(page)
    assert float(later[1]) < float(first[1])
    await wait_until(page, f"{BADGE}.dataset.state === 'open'", timeout=10000)
    await asyncio.sleep(0.5)  # a countdown left running would write over "Connected"
    assert await badge(page) == "Connected"


async def test_a_table_the_store_lost_leaves_for_the_lobby_and_says_so(
    new_page, server: GameServer, redis_url_clean: str, screenshot
) -> None:
    """The store forgot the table (its data flushed): the host node drops it, and the page's
    next request for it is answered ``not_found``. Before, the page showed the message and kept
    the table on screen, frozen; now it goes to the lobby, the message in sight."""
    page = await new_page("Host")
    await create_table(page, "Forgotten", seats=2, max_rounds=None)
    await add_bots(page, 1)
    table = str(await page.evaluate("window.blackdrez.table().id"))
    with redis.Redis.from_url(redis_url_clean) as client:
        client.flushall()
    await wait_for(lambda: table not in server.node.rooms, "the node dropped the lost table")
    await page.locator("#start").click()
    await page.locator(".toast", has_text="That table is gone").wait_for()
    await page.locator("#create").wait_for()
    assert await page.evaluate("window.blackdrez.table()") is None
    assert await page.locator(".blackdrez").count() == 0
    await screenshot(page, "table-gone", full=False)


async def test_the_header_says_when_the_server_cannot_save_moves_until_it_can(
    new_page, server: GameServer, store_user: RedisUser, screenshot
) -> None:
    """A request answered ``unavailable`` (the node cannot reach its store): before, the badge
    went on saying "Connected" and only a passing message told; now the header says so until a
    request succeeds."""
    page = await new_page("Host")
    phone = await new_page("Guest", width=390, height=844)
    await create_table(page, "Cut off", seats=2, max_rounds=None)
    await add_bots(page, 1)
    await store_user.cut()
    try:
        await page.locator("#start").click()
        await page.locator(".toast", has_text="could not save that").wait_for()
        await wait_until(page, f"{BADGE}.dataset.store === 'down'")
        assert await badge(page) == "Connected · server busy"
        await screenshot(page, "server-busy", full=False)
        await phone.locator("#quick-join").click()
        await wait_until(phone, f"{BADGE}.dataset.store === 'down'", timeout=15000)
        await screenshot(phone, "server-busy-phone", full=False)
    finally:
        await store_user.restore()
    await wait_for(lambda: server.node.store.health.up, "the node reached its store again")
    await page.locator("#start").click()
    await page.locator(".seat.mine .hand .card").first.wait_for(timeout=15000)
    # The start may have waited for the table to move (its lease can lapse in the outage): the
    # header says "Connected" once the start is answered, not some seconds later (CI's failure).
    await wait_until(page, f"{BADGE}.textContent === 'Connected'", timeout=1000)
    assert await page.evaluate(f"{BADGE}.dataset.store") is None
