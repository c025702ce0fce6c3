"""Fixtures for browser tests: an in-process server and real headless Chromium (Debian's).

Chromium must be installed (``apt-get install chromium``): without it these tests fail, they do
not skip, so a CI machine that lacks it is noticed.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from blackdrez.clients.bots import run_bot
from blackdrez.server.app import GameServer, Settings

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

PageFactory = Callable[..., Awaitable[Page]]


@pytest.fixture
async def server() -> AsyncIterator[GameServer]:
    """A server on a free port serving the browser client from clients/browser/."""
    game_server = GameServer(Settings(port=0, ping_interval=None), bot_client=run_bot)
    await game_server.start()
    yield game_server
    await game_server.stop()


@pytest.fixture
async def records_server(tmp_path: Path) -> AsyncIterator[GameServer]:
    """A server that keeps records (a SQLite file of the test's own): the pages of players,
    ratings and stored games."""
    game_server = GameServer(
        Settings(port=0, ping_interval=None, db_url=f"sqlite:///{tmp_path / 'records.db'}"),
        bot_client=run_bot,
    )
    await game_server.start()
    yield game_server
    await game_server.stop()


@pytest.fixture
def base_url(server: GameServer) -> str:
    """The client's address on the running server."""
    return f"http://127.0.0.1:{server.port}/"


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """Headless Debian Chromium; a missing browser is a failure, not a skip."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    async with async_playwright() as playwright:
        if executable is None and not Path(playwright.chromium.executable_path).exists():
            pytest.fail(
                "no Chromium: install Debian's (apt-get install chromium) or Playwright's "
                "(python -m playwright install chromium)"
            )
        launched = await playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        await launched.close()


@pytest.fixture
async def new_page(browser: Browser, base_url: str) -> AsyncIterator[PageFactory]:
    """Open the client as a new player (own storage) named ``name``; JS errors, and with
    ``csp=True`` anything the Content-Security-Policy blocks, fail the test."""
    contexts: list[BrowserContext] = []
    errors: list[str] = []

    async def open_page(name: str, width: int = 1280, height: int = 900, csp: bool = False) -> Page:
        # Playwright's wait_for_function evaluates its predicate with eval, which the server's
        # Content-Security-Policy forbids: pages bypass the policy unless a test asks for it
        # (``csp=True``; then it waits with ``helpers.wait_until``, not wait_for_function).
        context = await browser.new_context(
            viewport={"width": width, "height": height}, bypass_csp=not csp
        )
        contexts.append(context)
        # A name chosen before the first hello: the client greets as this new guest.
        await context.add_init_script(
            f"if (!localStorage.getItem('blackdrez.token'))"
            f" localStorage.setItem('blackdrez.name', {name!r});"
        )
        page = await context.new_page()
        page.on("pageerror", lambda error: errors.append(f"{name}: {error}"))
        # Whatever the Content-Security-Policy blocks is reported on the console: a failure too.
        page.on(
            "console",
            lambda message: (
                errors.append(f"{name}: {message.text}")
                if "Content Security Policy" in message.text
                else None
            ),
        )
        page.on("dialog", lambda dialog: dialog.accept())
        await page.goto(base_url)
        await page.locator("#status[data-state=open]").wait_for()
        return page

    yield open_page
    for context in contexts:
        await context.close()
    assert not errors, errors


@pytest.fixture
def screenshot() -> Callable[..., Awaitable[None]]:
    """Save a PNG of the page to docs/screenshots/<name>.png: the whole page, or with
    ``full=False`` what the window shows (a sticky bar stays where the player sees it), or with
    ``element`` the first element that CSS selector matches."""

    async def take(page: Page, name: str, full: bool = True, element: str | None = None) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = str(SCREENSHOTS / f"{name}.png")
        if element is not None:
            await page.locator(element).first.screenshot(path=path)
        else:
            await page.screenshot(path=path, full_page=full)

    return take
