"""Two browsers play BlackDrez together through the UI; a reload mid-game restores the table."""

from __future__ import annotations

import asyncio
import time

from playwright.async_api import Page

from blackdrez.server.app import GameServer
from tests.browser.helpers import (
    click_and_wait,
    create_table,
    page_on_turn,
    play_turn,
    seq,
    table_state,
    wait_until,
)


async def join_from_lobby(page: Page, table_name: str) -> None:
    row = page.locator(".table-row", has_text=table_name)
    await row.get_by_role("button", name="Join").click()
    await page.locator(".blackdrez").wait_for()


async def join_by_invite(host: Page, guest: Page) -> None:
    """The guest types the invite code the host's page shows."""
    code = await host.locator(".invite code").text_content()
    assert code
    # A wrong code: the server's error text shows, unobtrusively, and the guest stays put.
    await guest.locator("#invite").fill(code.split(":")[0] + ":wrong")
    await guest.get_by_role("button", name="Join with code").click()
    await guest.locator(".toast", has_text="private").wait_for()
    assert await guest.locator(".lobby").count() == 1
    await guest.locator("#invite").fill(code)
    await guest.get_by_role("button", name="Join with code").click()
    await guest.locator(".blackdrez").wait_for()


async def seat_up(
    host: Page, guest: Page, table_name: str, max_rounds: int | None = 2, private: bool = False
) -> None:
    """Host creates a table, the guest joins (lobby list or invite), both ready, host starts."""
    await create_table(host, table_name, max_rounds=max_rounds, private=private)
    if private:
        await join_by_invite(host, guest)
    else:
        await join_from_lobby(guest, table_name)
    assert await host.locator("#ready").count() == 0, "the host's Start starts them: no Ready"
    await guest.locator("#ready").click()
    await host.locator(".seat .badge.ready").nth(0).wait_for()
    start = host.locator("#start")
    await start.wait_for()
    assert await start.is_enabled()
    assert await guest.locator("#start").count() == 0, "only the host has a start button"
    await start.click()
    for page in (host, guest):
        await page.locator("#stock-count").wait_for()


async def test_two_players_play_a_game_to_the_end(new_page, screenshot, server) -> None:
    ann = await new_page("Ann")
    bob = await new_page("Bob")
    await seat_up(ann, bob, "Friday night")
    # The lobby of a third player lists the running table with both players.
    carol = await new_page("Carol")
    row = carol.locator(".table-row", has_text="Friday night")
    await row.wait_for()
    assert "Ann" in (await row.text_content() or "")
    assert "2/3 seated" in (await row.text_content() or "")
    assert await row.get_by_role("button", name="Join").is_enabled()
    await screenshot(carol, "lobby")
    # Carol watches: she sees the table but has no game buttons.
    await row.get_by_role("button", name="Watch").click()
    await carol.locator(".blackdrez").wait_for()
    assert await carol.locator("#hit").count() == 0
    assert "You are watching" in (await carol.locator(".controls").text_content() or "")
    await carol.reload()  # a watcher comes back to the table too
    await carol.locator(".blackdrez .seat").first.wait_for()

    turns = 0
    deadline = time.monotonic() + 40
    while not (await ann.locator(".ranking").count() and await bob.locator(".ranking").count()):
        assert time.monotonic() < deadline, "the game did not end in time"
        acted = False
        for page in (ann, bob):
            if await play_turn(page):
                acted = True
                turns += 1
        if not acted:
            await asyncio.sleep(0.05)

    for page in (ann, bob, carol):
        ranking = page.locator(".ranking")
        await ranking.wait_for()
        text = await ranking.text_content() or ""
        assert "Final ranking" in text and "Ann" in text and "Bob" in text
        view = (await table_state(page))["view"]
        assert view["phase"] == "over"
        assert view["result"]["rounds"] == 2
        # The seed is revealed and the browser checked it against the commitment.
        await page.locator(".fairness summary").click()
        await page.locator(".verdict.ok").wait_for()
        assert await page.locator("#seed").text_content() == view["seed"]
        assert page is carol or not await page.locator("#hit").is_enabled()
    # Both rounds can be won on the deal (two-card 11s: a few games in a hundred); otherwise
    # the pages played every turn. Such a game's whole log fits in what the page keeps.
    given = await ann.evaluate(
        "window.blackdrez.table().log.filter((e) => e.event.type === 'turn').length"
    )
    assert turns or not given, "turns were given that nobody played"
    # The ranking's order follows the piles.
    view = (await table_state(ann))["view"]
    piles = {s["seat"]: len(s["pile"]) for s in view["seats"]}
    first = view["result"]["ranking"][0]
    assert all(piles[s] == first["cards"] for s in first["seats"])
    assert first["cards"] == max(piles.values())


async def test_a_reload_mid_game_restores_the_table(new_page, server: GameServer) -> None:
    ann = await new_page("Ann")
    bob = await new_page("Bob")
    await seat_up(ann, bob, "Reload table", max_rounds=3, private=True)
    assert await ann.locator(".invite code").count() == 1, "the host sees the invite code"
    # Find who is on turn, remember what that page shows, and reload it.
    on_turn = await page_on_turn(ann, bob)
    before = await table_state(on_turn)
    cards = await on_turn.locator(".seat.mine .hand .card").evaluate_all(
        "cards => cards.map(c => c.dataset.card)"
    )
    assert cards == before["view"]["seats"][before["seat"]]["hand"]
    await on_turn.reload()
    await on_turn.locator("#status[data-state=open]").wait_for()
    await on_turn.locator(".blackdrez .seat.mine .hand .card").first.wait_for()
    after = await table_state(on_turn)
    assert after["id"] == before["id"]
    assert after["seat"] == before["seat"]
    assert after["seq"] >= before["seq"]
    assert (
        await on_turn.locator(".seat.mine .hand .card").evaluate_all(
            "cards => cards.map(c => c.dataset.card)"
        )
        == cards
    )
    assert await on_turn.locator("#withdraw").is_enabled()
    # At a phone's width the table still shows the hand and the buttons.
    await on_turn.set_viewport_size({"width": 390, "height": 844})
    await on_turn.locator("#withdraw").scroll_into_view_if_needed()
    assert await on_turn.locator("#withdraw").is_visible()
    assert await on_turn.locator(".seat.mine .hand .card").first.is_visible()
    # The buttons still work: withdraw, and the other page sees it.
    other = bob if on_turn is ann else ann
    other_seq = await seq(other)
    await click_and_wait(on_turn, on_turn.locator("#withdraw"))
    await other.wait_for_function(f"window.blackdrez.table().seq > {other_seq}", timeout=5000)
    log = await other.locator(".events").text_content() or ""
    assert "withdrew" in log

    # A dropped connection (closed by the server) comes back by itself and resyncs.
    player = await other.evaluate("window.blackdrez.conn.welcome.player")
    held = await seq(other)
    server.node.clients[player].close(4003, "test: dropped")
    await other.locator("#status[data-state=waiting]").wait_for()
    await other.locator("#status[data-state=open]").wait_for()
    await other.wait_for_function(
        "(() => { const t = window.blackdrez.table(); return t && !t.resyncing; })()"
    )
    assert await seq(other) >= held
    assert (await table_state(other))["seat"] is not None


async def test_updates_apply_in_order_and_a_gap_resyncs(new_page) -> None:
    ann = await new_page("Ann")
    bob = await new_page("Bob")
    # No round limit: two rounds won on the deal would end a 2-round game, and a finished
    # game shows no hands (this failed once in the suite).
    await seat_up(ann, bob, "Order table", max_rounds=None)
    # a round won on the deal is followed by the pause, then the next deal: wait for a round in
    # play, so that no update is due while the test feeds the client its own
    await ann.wait_for_function("window.blackdrez.table().view.phase === 'playing'")
    state = await table_state(ann)
    held = state["seq"]
    await ann.evaluate(
        "() => { const ws = window.blackdrez.conn.ws; const send = ws.send.bind(ws);"
        " window.sent = []; ws.send = (d) => { window.sent.push(JSON.parse(d)); send(d); }; }"
    )
    # An update that repeats old events changes nothing.
    old = {
        "type": "update",
        "table": state["id"],
        "seq": held,
        "events": [{"seq": held, "event": {"type": "turn", "seat": 0}}],
        "view": None,
        "legal": [],
    }
    await ann.evaluate("u => window.blackdrez.store.apply(u)", old)
    assert (await table_state(ann))["view"] == state["view"]
    assert await ann.evaluate("window.sent") == []
    # An update after a gap is not applied: the client resyncs and gets the real state back.
    gap = {**old, "seq": held + 5, "events": [{"seq": held + 5, "event": {"type": "turn"}}]}
    await ann.evaluate("u => window.blackdrez.store.apply(u)", gap)
    await ann.wait_for_function(
        "(() => { const t = window.blackdrez.table(); return !t.resyncing && t.view; })()"
    )
    sent = await ann.evaluate("window.sent")
    assert [(m["type"], m["since"]) for m in sent] == [("resync", held)]
    after = await table_state(ann)
    assert after["seq"] == held
    assert after["view"] == state["view"]
    assert await ann.locator(".seat.mine .hand .card").count() == 2
    # So is an update with no events but a later number (only the info changed after events
    # this client never got): it is not taken as held.
    info_only = {**old, "seq": held + 3, "events": []}
    await ann.evaluate("u => window.blackdrez.store.apply(u)", info_only)
    await ann.wait_for_function(
        "(() => { const t = window.blackdrez.table(); return !t.resyncing && t.view; })()"
    )
    sent = await ann.evaluate("window.sent")
    assert [(m["type"], m["since"]) for m in sent] == [("resync", held), ("resync", held)]
    assert (await table_state(ann))["seq"] == held
    # An answer that is not applied (older than what is held: overtaken on the way) still ends
    # the resync, so that the next gap is resynced too.
    ended = await ann.evaluate(
        "async () => { const t = window.blackdrez.table(); t.seq += 10;"
        " await window.blackdrez.store.resync(t.id); const done = !t.resyncing; t.seq -= 10;"
        " return done; }"
    )
    assert ended, "a resync answered by an older update never ended"


async def test_the_host_adds_bots_from_the_table_and_plays_them(new_page) -> None:
    """Bots the host adds take the empty seats, are ready at once, and play the game out; under
    the server's Content-Security-Policy, which blocks nothing the client does."""
    host = await new_page("Hostess", csp=True)
    await create_table(host, "Bots welcome", seats=3, max_rounds=1)
    await host.locator("#bot-strategy").select_option("bust_probability")
    await host.locator("#add-bot").click()
    await host.locator(".seat .badge.ready").nth(0).wait_for()
    await host.locator("#add-bot").click()
    await host.locator("#add-bot").wait_for(state="detached")  # no empty seat left
    bot_seats = await host.locator(".seat", has_text="Bot").count()
    assert bot_seats == 2
    start = host.locator("#start")
    await start.wait_for()
    # (wait_until, not wait_for_function: the policy forbids the latter's eval)
    await wait_until(host, "!document.querySelector('#start').disabled", timeout=30000)
    await start.click()
    await host.locator("#stock-count").wait_for()
    deadline = time.monotonic() + 30
    while await host.locator(".ranking").count() == 0:
        assert time.monotonic() < deadline, "the game with the bots did not end"
        if not await play_turn(host):
            await asyncio.sleep(0.05)
    assert await host.locator(".ranking").count() == 1


async def test_a_private_table_is_joined_by_its_invite_link(new_page, screenshot) -> None:
    """A private table gave only a code to paste into the lobby's field: the host now has a
    link to send, and a friend who opens it in another browser sits at the table and is shown
    the same link to pass on; a link with a wrong code says why and leaves them in the lobby."""
    host = await new_page("Hostess", width=390, height=844)
    await create_table(host, "Friends only", seats=3, private=True)
    code = await host.locator(".invite code").text_content()
    link = await host.locator("#invite-link").input_value()
    assert link == f"{host.url.split('#')[0]}#/invite/{code}"
    stranger = await new_page("Stranger")
    await stranger.goto(link.rsplit(":", 1)[0] + ":wrong")
    await stranger.locator(".toast", has_text="private").wait_for()
    assert await stranger.locator(".lobby").count() == 1
    friend = await new_page("Friend")
    await friend.goto(link)
    await friend.locator(".blackdrez .seat.mine").wait_for()
    assert "/invite/" not in friend.url, "the link is used once: a reload does not join again"
    # The friend may bring the next friend: the same code and link show at their seat too.
    assert await friend.locator(".invite code").text_content() == code
    assert await friend.locator("#invite-link").input_value() == link.replace(
        host.url.split("#")[0], friend.url.split("#")[0]
    )
    await host.locator(".seat", has_text="Friend").wait_for()
    await screenshot(host, "invite-link-phone", full=False)
    assert await host.evaluate("document.documentElement.scrollWidth") <= 390
