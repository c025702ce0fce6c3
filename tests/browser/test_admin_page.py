"""The admin page in a real browser: log in with the token, see the live tables and a table's
log, close a table; under the Content-Security-Policy, with no error."""

from __future__ import annotations

from playwright.async_api import Browser, expect

from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.app import GameServer

TOKEN = "admin-page-token"


async def test_the_admin_page_lists_shows_and_closes_a_table(
    browser: Browser, server: GameServer, base_url: str
) -> None:
    server.settings.admin_token = TOKEN
    ann = await Client.connect(f"ws://127.0.0.1:{server.port}/", name="<b>Ann</b>")
    context = await browser.new_context()
    errors: list[str] = []
    try:
        table = (await ann.request(v1.CreateTable())).table.id
        await ann.say(table, "<i>rude</i>")
        await ann.wait_until(lambda: ann.tables[table].chat)
        line = ann.tables[table].chat[-1].seq
        await ann.request(v1.Report(table=table, seq=line, reason="a test report"))
        page = await context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("dialog", lambda dialog: dialog.accept())
        await page.goto(base_url + "admin.html")
        await page.fill("#token", "wrong")
        await page.click("#login button[type=submit]")
        await expect(page.locator("#status")).to_contain_text("401")
        # The browser logs each refused fetch itself, on its own time: wait for those lines
        # (one came after the status now and then, and was taken for an error of the page's;
        # the page makes three calls: nodes, tables, reports).
        for _ in range(100):
            if sum("401" in error for error in errors) >= 3:
                break
            await page.wait_for_timeout(50)
        assert all("401" in error for error in errors), errors
        errors.clear()
        await page.fill("#token", TOKEN)
        await page.click("#login button[type=submit]")
        row = page.locator(f"#tables tr[data-table={table}]")
        await expect(row).to_contain_text("<b>Ann</b>")  # a name is text, never markup
        await expect(page.locator("#nodes tbody")).to_contain_text(server.settings.node_id)
        report = page.locator("#reports tbody tr").first
        await expect(report).to_contain_text("<b>Ann</b>: <i>rude</i>")  # text, never markup
        await expect(report).to_contain_text("a test report")
        await row.get_by_role("button", name="Events").click()
        await expect(page.locator("#events tbody")).to_contain_text('"type":"create"')
        await row.get_by_role("button", name="Close").click()
        await expect(page.locator("#tables tbody")).to_contain_text("No live table.")
        state = ann.tables[table]
        await ann.wait_until(lambda: state.info and state.info.status == "closed")
        # (a refused fetch of the wrong token's, logged later still, is not the page's error)
        assert not [error for error in errors if "401" not in error], errors
    finally:
        await context.close()
        await ann.close()
