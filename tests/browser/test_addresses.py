"""Every place has an address (issue 36): a table's and a solitaire's ``#/table/<id>``, the
lobby's ``/``; Back and Forward move between them, a reload lands where the player was, a public
table's link (copied with one click) lets someone else watch it, and a place that is gone gives
way to the lobby."""

from __future__ import annotations

import re

from tests.browser.helpers import create_table, resign, start_deal, wait_until

TABLE_URL = re.compile(r"#/table/([^/#?]+)$")


def table_in(url: str) -> str | None:
    found = TABLE_URL.search(url)
    return found.group(1) if found else None


async def on_lobby(page) -> None:
    await page.locator(".lobby").wait_for()
    assert "#" not in page.url, page.url


async def test_a_table_has_an_address_back_and_forward_move_and_a_reload_stays(
    new_page, screenshot
) -> None:
    page = await new_page("Ann", width=390, height=844)
    await create_table(page, "Addressed", seats=2)
    table = table_in(page.url)
    assert table is not None and table == await page.evaluate("window.blackdrez.table().id")
    await page.locator(".blackdrez .seat.mine").wait_for()
    await page.locator("[data-key=lobby]").first.click()
    await on_lobby(page)
    await page.go_back()
    await page.locator(".blackdrez .seat.mine").wait_for()
    assert table_in(page.url) == table
    await page.go_forward()
    await on_lobby(page)
    await page.go_back()
    await page.locator(".blackdrez .seat.mine").wait_for()
    await page.reload()
    await page.locator(".blackdrez .seat.mine").wait_for()
    assert table_in(page.url) == table
    # a records page and Back: the table again
    await page.locator("a[href='#/ratings']").click()
    await page.locator("body[data-screen=records]").wait_for()
    await page.go_back()
    await page.locator(".blackdrez .seat.mine").wait_for()
    assert table_in(page.url) == table
    await screenshot(page, "table-address-phone", full=False)
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390


async def test_a_public_tables_link_is_copied_and_lets_someone_watch_it(new_page) -> None:
    host = await new_page("Host")
    await host.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await create_table(host, "Open to all", seats=3)
    table = table_in(host.url)
    link = await host.locator("#invite-link").input_value()
    assert link == host.url and table_in(link) == table
    await host.locator("#copy-link").click()
    await host.locator(".toast", has_text="copied").wait_for()
    assert await host.evaluate("navigator.clipboard.readText()") == link
    guest = await new_page("Guest", width=390, height=844)
    await guest.goto(link)
    await guest.locator(".blackdrez").wait_for()
    await wait_until(guest, f"window.blackdrez.table()?.id === {table!r}")
    assert await guest.locator(".seat.mine").count() == 0  # watching, with the free seats offered
    await guest.locator("button", has_text="Sit here").first.wait_for()
    await guest.locator("button", has_text="Sit here").first.click()
    await guest.locator(".seat.mine").wait_for()
    await host.locator(".seat", has_text="Guest").wait_for()
    await guest.reload()
    await guest.locator(".seat.mine").wait_for()


async def test_a_finished_solitaire_is_left_for_the_lobby_at_slash_and_a_gone_table_too(
    new_page, base_url
) -> None:
    page = await new_page("Sol")
    await start_deal(page, "blackjack_piles", 3)
    solitaire = table_in(page.url)
    assert solitaire is not None
    await resign(page)
    await page.goto(base_url)  # the lobby's address: the lobby, not the finished game
    await on_lobby(page)
    await page.reload()
    await on_lobby(page)
    await page.goto(f"{base_url}#/table/{solitaire}")  # its own address still shows it
    await page.locator("#stat-score").wait_for()
    # a table that does not exist: said, and the lobby in its place (Back does not return there)
    await page.goto(f"{base_url}#/table/t_gone_for_good")
    await page.locator(".toast", has_text="no longer there").wait_for()
    await on_lobby(page)
