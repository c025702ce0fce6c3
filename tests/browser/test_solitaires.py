"""One browser plays both solitaires through clicks (and a drag), resigns, and sees the scores.

Numbered deals make the games known in advance: the test keeps the engine's own copy of each
game in step with the clicks and checks what the page shows against it.
"""

from __future__ import annotations

import pytest
from playwright.async_api import Page

from blackdrez.games import GAMES
from blackdrez.games.blackjack_piles import rules as bp
from blackdrez.games.blue_jacket import rules as bj
from tests.browser.helpers import (
    LOW_CONTRAST,
    click_and_wait,
    click_move_and_wait,
    resign,
    seq,
    start_deal,
)

PILES_DEAL = 7
BLUE_JACKET_DEAL = 1


async def stats(page: Page, *names: str) -> list[int]:
    return [int(await page.locator(f"#stat-{name}").text_content() or -1) for name in names]


def top(pile: int) -> str:
    return f".pile-column[data-pile='{pile}'] button.card"


def slot(pile: int) -> str:
    return f".pile-column[data-pile='{pile}'] button.slot"


async def place(page: Page, engine: bp.BlackjackPiles, pile: int) -> None:
    """Put the stock's top card on ``pile``: click an empty pile, else its "Place here"."""
    if not engine.state.piles[pile]:
        await click_and_wait(page, page.locator(slot(pile)))
    else:
        await click_and_wait(
            page, page.locator(f".pile-column[data-pile='{pile}'] button.place-here")
        )
    engine.apply(0, bp.Place(pile))


async def test_both_solitaires_by_clicks(new_page, screenshot) -> None:
    page = await new_page("Sol")

    # ------------------------------------------------------------ Blackjack Piles
    await start_deal(page, "blackjack_piles", PILES_DEAL)
    seed = GAMES["blackjack_piles"].deal_seed(PILES_DEAL)
    engine = bp.BlackjackPiles.new(bp.Config(), seed)
    assert await page.locator("#stock").get_attribute("data-card") == engine.view(0).stock_top
    assert await page.locator(".fairness code").first.get_attribute("title") == engine.commitment
    # By keyboard: Tab reaches the piles and Enter places the stock's card on an empty one.
    await page.locator("#stock").focus()
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.dataset.key") == "pile-0"
    before = await seq(page)
    await page.keyboard.press("Enter")
    await page.wait_for_function(f"window.blackdrez.table().seq > {before}")
    engine.apply(0, bp.Place(0))
    assert await page.evaluate("document.activeElement.dataset.key") == "pile-0", "focus stays"
    # A second card on pile 1 (stock, then the pile), then a move to the empty pile 2.
    await place(page, engine, 0)
    await page.locator(top(0)).click()
    assert await page.locator(".pile-column.target").count() == 4, "empty piles are targets"
    await click_and_wait(page, page.locator(slot(1)))
    engine.apply(0, bp.Move(0, 1))
    cashes = 0
    shot = False
    for _ in range(60):
        if cashes >= 3:
            break
        legal = engine.legal_actions(0)
        cash = next((a for a in legal if isinstance(a, bp.Cash)), None)
        if cash is None:
            piles = engine.state.piles
            target = min(range(len(piles)), key=lambda i: (len(piles[i]) > 0, len(piles[i])))
            await place(page, engine, target)
            continue
        clicks = [page.locator(top(p)) for p in cash.piles]
        if cash.stock:
            clicks.append(page.locator("#stock"))
        for locator in clicks[:-1]:
            await locator.click()
            assert await locator.get_attribute("aria-pressed") == "true"
        if len(clicks) >= 2:  # the picture: the last hand, one click short of cashing
            assert await page.locator(".card.selected").count() == len(clicks) - 1
            await screenshot(page, "blackjack-piles")
            shot = True
        await click_and_wait(page, clicks[-1])
        engine.apply(0, cash)
        cashes += 1
        assert await stats(page, "hands") == [engine.state.hands]
    assert cashes == 3 and shot
    view = engine.view(0)
    assert await stats(page, "hands", "left", "score") == [view.hands, view.left, view.score]
    await resign(page)
    engine.apply(0, bp.Resign())
    final = engine.view(0)
    assert final.over and final.score > 0
    assert await page.locator("#final-score").text_content() == str(final.score)
    assert await page.locator("#stat-score").text_content() == str(final.score)
    assert await page.locator("table.results tbody tr").count() == 1
    par = GAMES["blackjack_piles"].par(engine)  # the par shown next to the score
    assert par is not None and par["par"] >= final.score
    shown_par = f"{par['par']}{'' if par['exact'] else '+'}"
    assert await page.locator("#par-score").text_content() == shown_par
    assert await page.locator("table.results tbody td").nth(5).text_content() == shown_par
    await page.get_by_role("button", name="Back to lobby").click()

    # ------------------------------------------------------------ Blue Jacket
    await start_deal(page, "blue_jacket", BLUE_JACKET_DEAL)
    seed = GAMES["blue_jacket"].deal_seed(BLUE_JACKET_DEAL)
    game = bj.BlueJacket.new(bj.Config(), seed)
    assert await stats(page, "score", "stock") == [game.score, game.stock_count]
    # Drop a single row card on another: an interchange.
    swap = next(a for a in game.legal_actions(0) if isinstance(a, bj.Interchange))
    before = await seq(page)
    await page.drag_and_drop(f"[data-loc='{swap.a}']", f"[data-loc='{swap.b}']")
    await page.wait_for_function(f"window.blackdrez.table().seq > {before}")
    card_a = game.view(0)
    game.apply(0, swap)
    assert card_a.score < game.score
    shown = await page.locator(f"[data-loc='{swap.b}'] .card").get_attribute("data-card")
    assert shown == game.view(0).rows[int(swap.b[1]) - 1][int(swap.b[3]) - 1][-1]
    # Click moves: a card, then its destination (the legal targets light up in between).
    for step in range(3):
        moves = [a for a in game.legal_actions(0) if isinstance(a, bj.Move)]
        move = next((m for m in moves if not m.target.startswith("b")), moves[0])
        await page.locator(f"[data-loc='{move.source}']").click()
        targets = {m.target for m in moves if m.source == move.source} | {
            (i.b if i.a == move.source else i.a)
            for i in game.legal_actions(0)
            if isinstance(i, bj.Interchange) and move.source in (i.a, i.b)
        }
        shown_targets = await page.locator(".bj-pile.target").evaluate_all(
            "piles => piles.map(p => p.dataset.loc)"
        )
        assert set(shown_targets) == targets
        if step == 0:
            await screenshot(page, "blue-jacket")
        await click_move_and_wait(page, page.locator(f"[data-loc='{move.target}']"))
        game.apply(0, move)
        assert await stats(page, "score", "moves") == [game.score, game.view(0).moves]
    if game.can_deal():
        await click_and_wait(page, page.locator("#stock"))
        game.apply(0, bj.Deal())
        assert await stats(page, "stock") == [game.stock_count]
    await resign(page)
    game.apply(0, bj.Resign())
    assert await page.locator("#final-score").text_content() == str(game.score)
    assert await page.locator("#par-score").text_content() == "104"  # the deal is winnable
    assert f"you scored {game.score}" in (await page.locator("#par").text_content() or "")
    await page.locator(".fairness summary").click()
    await page.locator(".verdict.ok").wait_for()
    await page.get_by_role("button", name="Back to lobby").click()

    # ------------------------------------------------------------ a random deal scores
    await page.locator("button[data-start=blackjack_piles]").click()
    await page.locator("#stat-score").wait_for()
    await resign(page)
    score = await page.locator("#final-score").text_content()
    await page.get_by_role("button", name="Back to lobby").click()
    await page.locator("select[name=deal]").select_option("random")  # the daily board is first
    board = page.locator("[data-board=blackjack_piles] .leaderboard")
    await board.wait_for()
    assert "Sol" in (await board.text_content() or "")
    assert score in (await board.text_content() or "")


async def test_piles_only_card_selected_empty_piles_still_take_the_stock(new_page) -> None:
    """A pile's only card cannot move to an empty pile: with it selected, the empty piles still
    say "place here", and a click on one places the stock's card there."""
    page = await new_page("Sol")
    await start_deal(page, "blackjack_piles", PILES_DEAL)
    engine = bp.BlackjackPiles.new(bp.Config(), GAMES["blackjack_piles"].deal_seed(PILES_DEAL))
    await place(page, engine, 0)
    assert not any(isinstance(a, bp.Move) for a in engine.legal_actions(0))
    await page.locator(top(0)).click()
    assert await page.locator(top(0)).get_attribute("aria-pressed") == "true"
    assert await page.locator(".slot", has_text="move here").count() == 0
    assert await page.locator(slot(1)).text_content() == "place here"
    assert "move the selected card" not in (
        await page.locator(slot(1)).get_attribute("aria-label") or ""
    )
    await click_and_wait(page, page.locator(slot(1)))
    engine.apply(0, bp.Place(1))
    assert await page.locator(".toast", has_text="cannot move there").count() == 0
    shown = await page.locator(".pile-column[data-pile='1'] .card").get_attribute("data-card")
    assert shown == engine.state.piles[1][-1]
    assert await page.locator("#stock").get_attribute("data-card") == engine.view(0).stock_top
    # A card on a pile of two may move: then the empty piles offer "move here".
    await place(page, engine, 0)
    await page.locator(top(0)).click()
    assert await page.locator(".slot", has_text="move here").count() == 3
    await click_and_wait(page, page.locator(slot(2)))
    engine.apply(0, bp.Move(0, 2))
    shown = await page.locator(".pile-column[data-pile='2'] .card").get_attribute("data-card")
    assert shown == engine.state.piles[2][-1]


async def test_on_a_phone_the_rounds_table_of_a_finished_session_fits_the_screen(new_page) -> None:
    """At the end of a Blackjack Piles session the table of rounds (with its Par column) ran
    past a phone's right edge and the page scrolled sideways: it fits. (And the last round's
    rule about the stock's card, meaningless once the session is over, is gone.)"""
    page = await new_page("Sol", width=390, height=844)
    await start_deal(page, "blackjack_piles", PILES_DEAL)
    await resign(page)
    rounds = page.locator("table.results")
    await rounds.locator("th", has_text="Par").wait_for()
    assert await page.locator(".stock-area .rule").count() == 0, "no round's rule once it is over"
    box = await rounds.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390


@pytest.mark.parametrize("width", [1280, 390])
async def test_piles_cards_left_say_they_count_the_piles_and_the_stock(
    new_page, screenshot, width
) -> None:
    """A newcomer was puzzled by "Cards left 52" beside "Stock 44": the count names what it
    holds (the piles and the stock) and says what it is for (the hands must beat it)."""
    page = await new_page("Sol", width=width, height=844)
    await start_deal(page, "blackjack_piles", PILES_DEAL)
    engine = bp.BlackjackPiles.new(bp.Config(), GAMES["blackjack_piles"].deal_seed(PILES_DEAL))
    for pile in (0, 1, 2):
        await place(page, engine, pile)
    left = page.locator(".stat", has=page.locator("#stat-left"))
    label = await left.locator("dt").text_content() or ""
    assert "piles" in label and "stock" in label, label
    assert "more hands" in (await left.get_attribute("title") or "")
    stock = int(await page.locator("#stock-count").text_content() or -1)
    on_piles = await page.locator(".pile-column .card").count()
    assert await stats(page, "left") == [stock + on_piles] == [engine.view(0).left]
    await screenshot(page, f"piles-stats-{width}", full=False)
    assert await page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("theme", ["light", "dark", "contrast"])
async def test_piles_labels_are_readable_on_the_felt(new_page, theme) -> None:
    """A pile's count against its cap ("1/3", in the rounds with a cap) was grey on the green
    felt (a contrast of 1.6 in the light theme): every text of the felt reads at WCAG AA's
    4.5. Round 1 has no cap: the count is added to a label as the page draws it then."""
    page = await new_page("Sol", width=1280, height=900)
    if theme != "light":
        await page.locator(".settings-menu summary").click()
        await page.locator("#theme").select_option(theme)
        await page.locator(".settings-menu summary").click()
    await start_deal(page, "blackjack_piles", PILES_DEAL)
    await page.evaluate(
        """() => { for (const label of document.querySelectorAll('.pile-label')) {
             const count = document.createElement('span');
             count.className = 'muted'; count.textContent = ' 1/3'; label.append(count); } }"""
    )
    await page.locator(".pile-column").first.evaluate("c => c.classList.add('full')")
    felt = await page.query_selector(".solitaire.piles")
    low = await page.evaluate(LOW_CONTRAST, felt)
    assert low == [], "\n".join(low)
