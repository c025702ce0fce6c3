"""A win is a moment (issue 36): a Blue Jacket win was announced below the fold, in one line
under the controls, with nothing to mark it. The end of the game now shows at the top of the
board and is brought into view, and a win is marked and celebrated once (suits burst from behind
the panel's words; with reduced motion, the panel alone)."""

from __future__ import annotations

import asyncio

import msgspec

from blackdrez.games import GAMES
from blackdrez.games.blue_jacket.solver import deal_seed, solve_deal
from blackdrez.server.table.assist import expert_hint, hint_job
from tests.browser.helpers import start_deal, table_state, wait_until

DEAL = 0  # a numbered deal the solver wins
IN_VIEW = """() => { const r = document.querySelector('.final').getBoundingClientRect();
  return r.top >= 0 && r.bottom <= innerHeight; }"""


def winning_line() -> list[dict]:
    solution = solve_deal(deal_seed(DEAL))
    assert solution.outcome == "winnable"
    return [msgspec.to_builtins(move) for move in solution.moves]


async def act(page, table: str, action: dict) -> None:
    """Play ``action`` as the page would (paced to the connection's limit), and check it was
    accepted."""
    error = "rate_limited"
    while error and error.startswith("rate_limited"):
        error = await page.evaluate(
            """([t, a]) => window.blackdrez.conn.request({ type: 'act', table: t, action: a })
              .then(() => null, (e) => e.code + ': ' + e.message)""",
            [table, action],
        )
        if error:
            await asyncio.sleep(0.25)
    assert error is None, (action, error)


async def play_to_the_end(page, table: str, line: list[dict]) -> None:
    """Play ``line`` until the game is over (the server finishes a game whose last moves are
    forced by itself)."""
    for move in line:
        if await page.evaluate("window.blackdrez.table().view.over"):
            return
        await act(page, table, move)


async def test_a_blue_jacket_win_is_shown_in_view_and_celebrated(new_page, screenshot) -> None:
    line = winning_line()
    for width, height, name in (
        (1280, 800, "blue-jacket-won"),
        (390, 844, "blue-jacket-won-phone"),
    ):
        page = await new_page("Winner", width=width, height=height)
        await start_deal(page, "blue_jacket", DEAL)
        table = (await table_state(page))["id"]
        # The player is at the bottom of the page, where the bottom row is.
        await page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        started = await page.evaluate("window.blackdrez.motion.started")
        await play_to_the_end(page, table, line)
        await page.locator(".final.won").wait_for()
        assert await page.locator(".final .win-line").text_content() == "You won!"
        assert await page.locator("#final-score").text_content() == "104"
        await wait_until(page, IN_VIEW.replace("() => ", "(() => ") + ")()")
        assert await page.locator(".final .celebration span").count() > 0
        assert await page.evaluate("window.blackdrez.motion.started") > started
        await screenshot(page, name, full=False)
        # Once: a redraw of the finished game does not celebrate again.
        await page.locator(".final .celebration").wait_for(state="detached", timeout=5000)
        await page.locator("#auto-aces").click()  # redraws the board
        assert await page.locator(".final .celebration").count() == 0


async def test_with_reduced_motion_a_win_is_marked_without_the_burst(new_page) -> None:
    line = winning_line()
    page = await new_page("Calm")
    await page.emulate_media(reduced_motion="reduce")
    await start_deal(page, "blue_jacket", DEAL)
    table = (await table_state(page))["id"]
    await play_to_the_end(page, table, line)
    await page.locator(".final.won").wait_for()
    assert await page.locator(".final .win-line").text_content() == "You won!"
    assert await page.locator(".celebration").count() == 0


PILES_DEAL = 4  # a numbered deal whose seven rounds the expert passes


def piles_winning_line() -> list[dict]:
    spec = GAMES["blackjack_piles"]
    engine = spec.create(None, spec.deal_seed(PILES_DEAL))
    line = []
    while not engine.over:
        move = expert_hint(hint_job("blackjack_piles", engine, 0))
        engine.apply(0, move)
        line.append(msgspec.to_builtins(move))
    last = engine.result().results[-1]
    assert last.round == 7 and last.passed
    return line


async def test_seven_rounds_of_blackjack_piles_passed_are_a_win(new_page) -> None:
    line = piles_winning_line()
    page = await new_page("Piler")
    await start_deal(page, "blackjack_piles", PILES_DEAL)
    table = (await table_state(page))["id"]
    started = await page.evaluate("window.blackdrez.motion.started")
    await play_to_the_end(page, table, line)
    await page.locator(".final.won").wait_for()
    assert await page.locator(".final .win-line").text_content() == "You won!"
    assert "All seven rounds passed" in (await page.locator(".final").text_content() or "")
    assert await page.evaluate("window.blackdrez.motion.started") > started
