"""A game the browser has no renderer of its own for: the fourth game (``tests/fourth_game``),
registered by one line in the server's environment, is listed in the lobby, explained by its
spec's rules text, played by its generic buttons to the end, and replayed by the generic viewer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.helpers import click_and_wait
from tests.fourth_game.server import running_server

GAME = "higher_or_lower"


@pytest.fixture
def base_url(tmp_path: Path) -> Iterator[str]:
    """The browser client of a server process with the fourth game registered."""
    with running_server(tmp_path) as base:
        yield f"{base}/"


async def test_an_unknown_game_is_drawn_and_played_by_the_generic_views(new_page) -> None:
    page = await new_page("Gen")
    menu = page.locator(f"form.solitaire[data-game={GAME}]")
    assert await menu.locator("h3").text_content() == "Higher or Lower"
    await menu.get_by_role("button", name="How to play").click()
    assert "higher or lower" in (await page.locator("#help .help-page").text_content() or "")
    await page.locator("#help button.close").click()

    await menu.get_by_role("button", name="Random deal").click()
    board = page.locator(f".generic-game[data-game={GAME}]")
    await board.wait_for()
    showing = page.locator(".generic-view dd[data-field=card] .card")
    assert await showing.get_attribute("data-card") == (
        await page.evaluate("window.blackdrez.table().view.card")
    )
    assert await board.locator(".actions button").all_text_contents() == ["higher", "lower", "stop"]
    while await board.locator("button[data-action=higher]").count():
        await click_and_wait(page, board.locator("button[data-action=higher]"))
    await board.get_by_role("button", name="Play again").wait_for()
    view = await page.evaluate("window.blackdrez.table().view")
    assert view["over"] and view["seed"]
    assert await page.locator(".generic-view dd[data-field=score]").text_content() == str(
        view["score"]
    )

    # The replay viewer shows its stored game's steps with the same generic fields.
    # (A predicate that returns a promise is truthy at once: poll the listing here.)
    stored = "fetch('/api/v1/games?game=higher_or_lower').then(r => r.json())"
    deadline = asyncio.get_running_loop().time() + 10
    while not (games := (await page.evaluate(stored))["games"]):
        assert asyncio.get_running_loop().time() < deadline, "the game was never stored"
        await asyncio.sleep(0.1)
    assert len(games) == 1
    game_id = games[0]["id"]
    await page.goto(f"{page.url.split('#')[0]}#/game/{game_id}")
    replayed = page.locator(".replay-felt .generic-view dd[data-field=card] .card")
    await replayed.wait_for()
    assert await replayed.get_attribute("data-card") == view["turned"][0]
