"""Ratings people can read, in a real browser: the 1500 scale at a rated table's seats and in the
lobby (provisional ones marked "?" with a reason), each rated game's change in a profile, a
rating chart with axes (and an empty state before two games), and profile figures that say why
they seem to disagree (a best score beside a higher one played with help; a daily deal's game
counted but listed only once its UTC day has ended)."""

from __future__ import annotations

import asyncio
import math
import time

import msgspec
import pytest
from playwright.async_api import Page

from blackdrez.server.app import GameServer
from blackdrez.server.records.ingest import finished_game
from blackdrez.server.records.model import FinishedGame, SeatPlayer
from blackdrez.server.records.ratings import change, display
from tests.browser.helpers import create_table
from tests.records.games import bot_record

PATIENCE_MS = 60_000
ORDINALS = [-1000.0, -70.0, -12.345, -1.8330937337715376, -0.025, 0.0, 0.025, 3.437685252509457,
            12.975, 25.0, 123.456]  # fmt: skip
BOTS = [("p_bot_a", "Bot Ada"), ("p_bot_b", "Bot Bea"), ("p_bot_c", "Bot Cal")]


@pytest.fixture
def server(records_server: GameServer) -> GameServer:
    """A server that keeps records (``conftest.records_server``)."""
    return records_server


def a_game(
    game_id: str,
    game: str,
    players: list[tuple[str, str, bool]],
    *,
    seed: str,
    ended_at: float,
    rated: bool = False,
    sealed_until: float | None = None,
    scored: bool = True,
) -> FinishedGame:
    """A verified finished game of ``players`` ``(id, name, bot)``, seat by seat."""
    record = bot_record(game, seed, len(players) if game == "blackdrez" else 4)
    return msgspec.structs.replace(
        finished_game(
            game_id=game_id,
            record=record,
            players=[
                SeatPlayer(seat=seat, player=player, name=name, bot=bot)
                for seat, (player, name, bot) in enumerate(players)
            ],
            started_at=ended_at - 300.0,
            ended_at=ended_at,
            rated=rated,
            table=f"t_{game_id}" if game == "blackdrez" else None,
            sealed_until=sealed_until,
        ),
        scored=scored,
    )


def signed(number: int) -> str:
    return f"+{number}" if number > 0 else f"\u2212{-number}" if number < 0 else "\u00b10"


async def no_sideways_scroll(page: Page, width: int) -> None:
    assert await page.evaluate("document.documentElement.scrollWidth") <= width


async def test_seats_and_the_lobby_show_ratings_on_the_1500_scale(
    new_page, screenshot, server: GameServer
) -> None:
    ann = await new_page("Ann")
    ann.set_default_timeout(PATIENCE_MS)
    # The browser's scale is the server's, number for number
    shown = await ann.evaluate(
        "async (ordinals) => { const m = await import('/scale.js');"
        " return ordinals.map(m.ratingDisplay); }",
        ORDINALS,
    )
    assert shown == [display(o) for o in ORDINALS]
    words = await ann.evaluate(
        "async () => { const m = await import('/rating.js');"
        " const r = (ordinal, games) =>"
        "  ({ordinal, mu: 25, sigma: 8, games, provisional: games < 10});"
        " return [m.ratingText(r(0, 0)), m.ratingText(r(25, 40)),"
        "  m.ratingChangeText(r(0.6, 3), r(1.3, 4)), m.ratingChangeText(r(1.3, 4), r(0.8, 5))]; }"
    )
    assert words == ["1500?", "2000", "1512 \u2192 1526 (+14)", "1526 \u2192 1516 (\u221210)"]
    assert change(0.6, 1.3) == 14

    await create_table(ann, "Rated evening", seats=3, rated=True)
    mine = ann.locator(".seat[data-seat='0'] .rating-tag")
    await mine.wait_for()
    assert await mine.text_content() == "1500?", "a new player starts at 1500, provisional"
    title = await mine.get_attribute("title") or ""
    assert "provisional" in title and "fewer than 10 rated games" in title, title
    assert "-" not in (await mine.text_content() or "")
    await screenshot(ann, "ratings-seat", element=".seat[data-seat='0']")

    phone = await new_page("Bea", width=390, height=844, csp=True)
    phone.set_default_timeout(PATIENCE_MS)
    ann_player = await ann.evaluate("window.blackdrez.conn.welcome.player")
    tag = phone.locator(f".table-row .player[data-player='{ann_player}'] .rating-tag")
    await tag.wait_for()
    assert await tag.text_content() == "1500?"
    await tag.scroll_into_view_if_needed()
    await screenshot(phone, "ratings-lobby-phone", full=False)
    await no_sideways_scroll(phone, 390)


async def test_a_profile_shows_each_rated_games_change_a_chart_with_axes_and_why_figures_differ(
    new_page, screenshot, server: GameServer
) -> None:
    assert server.records is not None
    page = await new_page("Ann")
    page.set_default_timeout(PATIENCE_MS)
    ann = await page.evaluate("window.blackdrez.conn.welcome.player")
    now = time.time()
    table = [(ann, "Ann", False)] + [(bot, name, True) for bot, name in BOTS]
    rated = 7
    for number in range(rated):
        await server.records.put_game(
            a_game(
                f"t_rated:{number}",
                "blackdrez",
                table,
                seed=f"evening {number}",
                ended_at=now - (rated - number) * 86400 * 2,
                rated=True,
            )
        )
    await server.records.put_game(  # Bo: one rated game so far
        a_game(
            "t_once:1",
            "blackdrez",
            [("p_bo", "Bo", False), ("p_cy", "Cy", False)],
            seed="once",
            ended_at=now - 3600,
            rated=True,
        )
    )
    # Blue Jacket: 58 ranked without help, 72 with hints (counted as a game, not as a best), and
    # today's daily deal, 64: counted at once, listed once the UTC day has ended
    day_ends = math.ceil(now / 86400) * 86400.0
    solo = [(ann, "Ann", False)]
    for game in (
        a_game("s_plain:1", "blue_jacket", solo, seed="bj9", ended_at=now - 7200),
        a_game("s_hints:1", "blue_jacket", solo, seed="bj4", ended_at=now - 3600, scored=False),
        a_game(
            "s_daily:1", "blue_jacket", solo, seed="bj5", ended_at=now - 60, sealed_until=day_ends
        ),
    ):
        await server.records.put_game(game)
    scores = {
        g.id: g.players[0].score
        for g in (await server.records.games(player=ann, game="blue_jacket"))[0]
    }
    assert scores == {"s_plain:1": 58, "s_hints:1": 72}, "the daily is not listed yet"
    history, _ = await server.records.rating_history(ann, "blackdrez", limit=20)
    (stat,) = [s for s in await server.records.stats(ann) if s.game == "blackdrez"]
    assert stat.rating is not None

    await page.goto(page.url.split("#")[0] + f"#/player/{ann}")
    card = page.locator(".rec-stat[data-game='blackdrez']")
    await card.wait_for()
    shown = f"{display(stat.rating.ordinal)}?"
    assert await card.locator(".rating").text_content() == shown
    assert "provisional" in (await card.locator(".rating").get_attribute("title") or "")
    assert f"{rated} games ({rated} rated)" in (await card.text_content() or "")

    # Each rated game's change, as the API gives it
    rows = page.locator(".rating-history li")
    assert await rows.count() == rated
    for index, point in enumerate(history):
        row = rows.nth(index)
        before = display(point.mu_before - 3 * point.sigma_before)
        expected = display(point.ordinal) - before
        assert await row.locator(".rating-change").text_content() == signed(expected)
        text = await row.text_content() or ""
        assert f"{before} \u2192 {display(point.ordinal)}" in text

    # The chart: axes with ticks, a line through every point, a title
    chart = page.locator("svg.rating-chart")
    assert await chart.get_attribute("role") == "img"
    label = await chart.get_attribute("aria-label") or ""
    assert "rating" in label.lower() and str(display(history[0].ordinal)) in label, label
    assert await chart.locator("title").count() >= 1
    ticks = [int(t) for t in await chart.locator(".y-axis .tick text").all_text_contents()]
    assert len(ticks) >= 3 and ticks == sorted(ticks)
    values = [display(p.ordinal) for p in history]
    assert ticks[0] <= min(values) and ticks[-1] >= max(values)
    assert await chart.locator(".x-axis .tick text").count() >= 2
    assert await chart.locator(".x-axis .axis-title, .y-axis .axis-title").count() == 2
    points = await chart.locator("polyline.line").get_attribute("points") or ""
    assert len(points.split()) == rated
    assert await chart.locator("circle.point").count() == rated

    # Figures that seemed to disagree say why, where they are
    bj = page.locator(".rec-stat[data-game='blue_jacket']")
    text = await bj.text_content() or ""
    assert "Best score 64" in text, text
    assert "72" in (await bj.locator(".why-best").text_content() or "")
    daily = await bj.locator(".why-unlisted").text_content() or ""
    assert "once the day ends (UTC)" in daily and "your time" in daily, daily
    hinted = page.locator(".game-row", has=page.locator("a[href='#/game/s_hints:1']"))
    assert await hinted.locator(".badge.unranked").count() == 1
    await screenshot(page, "ratings-profile")
    await no_sideways_scroll(page, 1280)
    for theme in ("dark", "contrast"):  # the chart's colours are the theme's
        await page.evaluate(f"document.documentElement.dataset.theme = {theme!r}")
        await screenshot(page, f"ratings-chart-{theme}", element=".rating-panel")
    await page.evaluate("document.documentElement.dataset.theme = 'light'")

    phone = await new_page("Phone", width=390, height=844, csp=True)
    phone.set_default_timeout(PATIENCE_MS)
    await phone.goto(phone.url.split("#")[0] + f"#/player/{ann}")
    await phone.locator("svg.rating-chart").wait_for()
    await asyncio.sleep(0.2)
    await no_sideways_scroll(phone, 390)
    box = await phone.locator("svg.rating-chart").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    await screenshot(phone, "ratings-profile-phone")
    await phone.locator("svg.rating-chart").scroll_into_view_if_needed()
    await screenshot(phone, "ratings-chart-phone", element=".rating-panel")

    # Empty state: one rated game
    await phone.goto(phone.url.split("#")[0] + "#/player/p_bo")
    empty = phone.locator(".rating-panel .chart-empty")
    await empty.wait_for()
    assert await empty.text_content() == "1 rated game so far: the chart starts after two."
    assert await phone.locator("svg.rating-chart").count() == 0
    await screenshot(phone, "ratings-chart-empty-phone", element=".rating-panel")

    # The ratings page: the same scale
    await page.locator(".records-nav a", has_text="Ratings").click()
    mine = page.locator(".boards-grid > div").first.locator("tr", has_text="Ann")
    await mine.wait_for()
    assert shown in (await mine.text_content() or "")
    head = await page.locator(".boards-grid > div").first.locator("thead").text_content() or ""
    assert "Rated games" in head
    await screenshot(page, "ratings-board")
    await phone.goto(phone.url.split("#")[0] + "#/ratings")
    await phone.locator(".rec-board").first.wait_for()
    await no_sideways_scroll(phone, 390)
    await screenshot(phone, "ratings-board-phone")
