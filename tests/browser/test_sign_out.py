"""One account in two browsers: the second takes the identity over (through the same node or
another) without the two kicking each other for ever, and signing out everywhere turns the other
browser into a plain guest."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Page

from blackdrez.clients.bots import run_bot
from blackdrez.server.app import GameServer, Settings

PATIENCE_MS = 90_000
"""Playwright's waits on a loaded machine (the suite shares two cores with other work)."""


def node_settings(tmp_path: Path, redis_url: str, node_id: str) -> Settings:
    """A node of a two-node deployment: one Redis, one records database."""
    return Settings(
        port=0,
        ping_interval=None,
        db_url=f"sqlite:///{tmp_path / 'records.db'}",
        redis_url=redis_url,
        node_id=node_id,
    )


@pytest.fixture
async def server(tmp_path: Path, redis_url_clean: str) -> AsyncIterator[GameServer]:
    """The node the browsers open first (``base_url``)."""
    game_server = GameServer(node_settings(tmp_path, redis_url_clean, "a"), bot_client=run_bot)
    await game_server.start()
    yield game_server
    await game_server.stop()


async def sign_up(page: Page, name: str, password: str) -> str:
    """Claim the page's guest identity as an account; return its player id."""
    player = await page.evaluate("window.blackdrez.conn.welcome.player")
    await page.locator("#account-link").click()
    form = page.locator("#sign-up")
    await form.locator("input[name=name]").fill(name)
    await form.locator("input[name=password]").fill(password)
    await form.get_by_role("button", name="Sign up").click()
    await page.locator(".profile h2", has_text=name).wait_for()
    return str(player)


async def laptop_then_phone(new_page, other: GameServer) -> tuple[Page, Page, str]:
    """Ann signs up on her laptop (node a, ``base_url``), then signs in on her phone through
    ``other`` (node b): the two pages and her player id."""
    laptop = await new_page("Ann")
    laptop.set_default_timeout(PATIENCE_MS)
    ann = await sign_up(laptop, "Ann Lee", "correct horse battery")
    phone = await new_page("Zed", width=390, height=844)
    phone.set_default_timeout(PATIENCE_MS)
    await phone.goto(f"http://127.0.0.1:{other.port}/")
    await phone.locator("#status[data-state=open]").wait_for()
    await sign_in(phone, "ann lee", "correct horse battery", ann)
    return laptop, phone, ann


async def sign_in(page: Page, name: str, password: str, player: str) -> None:
    await page.evaluate("location.hash = '#/account'")
    form = page.locator("#sign-in")
    await form.locator("input[name=name]").fill(name)
    await form.locator("input[name=password]").fill(password)
    await form.get_by_role("button", name="Sign in").click()
    await page.wait_for_function(
        f"window.blackdrez.conn.welcome && window.blackdrez.conn.welcome.player === {player!r}"
    )
    await page.locator("#status[data-state=open]").wait_for()


async def state(page: Page) -> tuple[str, str]:
    """The page's connection state and the player it last greeted as."""
    found, player = await page.evaluate(
        "[document.getElementById('status').dataset.state, window.blackdrez.conn.welcome.player]"
    )
    return found, player


async def test_a_browser_replaced_by_another_stays_out_until_the_player_says_play_here(
    new_page, screenshot, server: GameServer
) -> None:
    """Signing in on a phone replaces the laptop's connection (4004, one per player).
    Before, the laptop reconnected on its own, replacing the phone, which did the same: the two
    took the connection from each other every few seconds. Now the laptop waits, says why, and
    takes it back only when asked."""
    laptop = await new_page("Ann")
    laptop.set_default_timeout(PATIENCE_MS)
    ann = await sign_up(laptop, "Ann Lee", "correct horse battery")
    phone = await new_page("Zed", width=390, height=844)
    phone.set_default_timeout(PATIENCE_MS)
    await sign_in(phone, "ann lee", "correct horse battery", ann)

    notice = laptop.locator("#replaced")
    await notice.wait_for()
    assert "another tab or browser" in (await notice.text_content() or "")
    await screenshot(laptop, "replaced", full=False)
    await asyncio.sleep(3.0)  # longer than the client's reconnection delays
    assert await state(laptop) == ("replaced", ann)
    assert await state(phone) == ("open", ann)
    assert server.node.clients[ann] is not None
    await laptop.evaluate("location.hash = '#/'")
    await laptop.locator("#quick-join").click()  # a request while replaced says what to do
    await laptop.locator(".toast", has_text="press Play here to play in this one").wait_for()
    # More messages than the toasts hold: the notice stays until the player answers it.
    await laptop.evaluate("['One', 'Two', 'Three'].forEach((t) => window.blackdrez.ctx.toast(t))")
    assert await notice.is_visible()
    assert await state(laptop) == ("replaced", ann)

    await notice.get_by_role("button", name="Play here").click()
    await laptop.locator("#status[data-state=open]").wait_for()
    await phone.locator("#replaced").wait_for()
    await screenshot(phone, "replaced-phone", full=False)
    await asyncio.sleep(3.0)
    assert await state(laptop) == ("open", ann)
    assert await state(phone) == ("replaced", ann)


async def guest_name(page: Page) -> str:
    """The name the page last greeted as (shown in its header)."""
    return str(await page.evaluate("window.blackdrez.conn.welcome.name"))


async def test_a_browser_on_another_node_replaces_the_first_which_waits_to_play_here(
    new_page, server: GameServer, tmp_path: Path, redis_url_clean: str
) -> None:
    """Ann's laptop plays through node a; her phone signs in through node b, another server of
    the deployment. Before, both stayed connected as Ann; now the laptop is replaced (4004) as
    on one node: it shows the notice and waits, and Play here takes the identity back."""
    other = GameServer(node_settings(tmp_path, redis_url_clean, "b"), bot_client=run_bot)
    await other.start()
    try:
        laptop, phone, ann = await laptop_then_phone(new_page, other)

        notice = laptop.locator("#replaced")
        await notice.wait_for()
        assert "another tab or browser" in (await notice.text_content() or "")
        assert await state(laptop) == ("replaced", ann)
        assert ann not in server.node.clients and ann in other.node.clients

        await notice.get_by_role("button", name="Play here").click()
        await laptop.locator("#status[data-state=open]").wait_for()
        await phone.locator("#replaced").wait_for()
        assert await state(laptop) == ("open", ann)
        assert await state(phone) == ("replaced", ann)
    finally:
        await other.stop()


async def test_a_replaced_browser_of_an_account_signed_out_everywhere_comes_back_a_plain_guest(
    new_page, server: GameServer, tmp_path: Path, redis_url_clean: str
) -> None:
    """The phone (node b) replaced the laptop (node a), then signed out everywhere. Play here on
    the laptop finds its token refused: it goes on as a new guest with a guest name of its own,
    not as a guest named Ann Lee (which it was before)."""
    other = GameServer(node_settings(tmp_path, redis_url_clean, "b"), bot_client=run_bot)
    await other.start()
    try:
        laptop, phone, ann = await laptop_then_phone(new_page, other)
        await laptop.locator("#replaced").wait_for()
        await phone.evaluate("location.hash = '#/account'")
        await phone.get_by_role("button", name="Sign out everywhere").click()
        await phone.locator("text=Signed out everywhere else.").wait_for()

        await laptop.locator("#replaced").get_by_role("button", name="Play here").click()
        await laptop.wait_for_function(
            "document.getElementById('status').dataset.state === 'open' && "
            f"window.blackdrez.conn.welcome.player !== {ann!r}"
        )
        assert (await guest_name(laptop)).startswith("Guest-")
        assert await state(phone) == ("open", ann)
    finally:
        await other.stop()


async def test_signing_out_everywhere_turns_the_other_browser_into_a_guest_at_once(
    new_page, screenshot, server: GameServer, tmp_path: Path, redis_url_clean: str, monkeypatch
) -> None:
    """Ann is signed in on her laptop (node a) and on her phone (node b, another server of the
    deployment), and node a did not hear that the phone replaced the laptop (as a node of an
    older version: it drops the news). Signing out everywhere on the phone closes the laptop's
    connection at once (4007): the laptop says why and goes on as a new guest with a guest
    name of its own (it kept the account's name before); the phone stays Ann."""
    other = GameServer(node_settings(tmp_path, redis_url_clean, "b"), bot_client=run_bot)
    await other.start()
    monkeypatch.setattr(server.node, "close_replaced", lambda *news: None)
    try:
        laptop, phone, ann = await laptop_then_phone(new_page, other)
        assert await state(laptop) == ("open", ann), "node a did not hear of the phone"

        await phone.evaluate("location.hash = '#/account'")
        await phone.get_by_role("button", name="Sign out everywhere").click()
        await phone.locator("text=Signed out everywhere else.").wait_for()

        await laptop.locator(".toast", has_text="signed out everywhere").wait_for()
        await laptop.wait_for_function(
            "document.getElementById('status').dataset.state === 'open' && "
            f"window.blackdrez.conn.welcome.player !== {ann!r}"
        )
        await screenshot(laptop, "signed-out-everywhere", full=False)
        assert (await guest_name(laptop)).startswith("Guest-")
        assert await state(phone) == ("open", ann)
        await phone.reload()  # the phone keeps the new token
        await phone.locator("#status[data-state=open]").wait_for()
        assert await state(phone) == ("open", ann)
    finally:
        await other.stop()
