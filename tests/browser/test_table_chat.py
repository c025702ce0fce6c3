"""Table chat in the browser (issue 37): players and spectators write lines and canned lines,
shown as text (never markup); a player can mute another (remembered on this browser); the host
sends a spectator away; a table can keep its chat to its players; a reload shows the earlier
lines; new lines out of sight are counted; on a phone the chat is usable below the action bar.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from playwright.async_api import Page

from blackdrez.protocol import v1
from blackdrez.server.app import GameServer
from blackdrez.server.table.chat import ChatReport
from tests.browser.helpers import answer, create_table, settled, wait_until
from tests.browser.test_blackdrez_table import join_from_lobby, seat_up

XSS = "<img src=x onerror=alert(1)>"


async def say(page: Page, text: str) -> None:
    """Type ``text`` in the chat and press Enter; wait until the line comes back."""
    field = page.locator("#chat-input")
    await field.fill(text)
    await field.press("Enter")
    await line(page, text).wait_for(state="attached")


def line(page: Page, text: str):
    """The chat line whose text is ``text``."""
    return page.locator(".chat-lines .chat-line", has_text=text)


async def player_id(page: Page) -> str:
    return str(await page.evaluate("window.blackdrez.conn.welcome.player"))


async def watch_from_lobby(page: Page, table_name: str) -> None:
    row = page.locator(".table-row", has_text=table_name)
    await row.get_by_role("button", name="Watch").click()
    await page.locator(".blackdrez .seat").first.wait_for()


async def test_players_and_a_spectator_chat_both_ways(new_page, screenshot) -> None:
    ann = await new_page("Ann", width=1280, height=800)
    bob = await new_page("Bob")
    native: list[str] = []
    for page in (ann, bob):
        page.on("dialog", lambda dialog: native.append(dialog.message))
    await seat_up(ann, bob, "Chatty table", max_rounds=None)
    carol = await new_page("Carol")
    await watch_from_lobby(carol, "Chatty table")

    # The chat list is a polite log region, labelled; the field says what it is for.
    lines = ann.locator(".chat-lines")
    assert await lines.get_attribute("role") == "log"
    assert await lines.get_attribute("aria-live") == "polite"
    assert await ann.locator("#chat-input").get_attribute("aria-label")
    assert await ann.locator("#chat-input").get_attribute("maxlength") == "300"

    await say(ann, "Hi Bob, ready to lose?")
    await ann.evaluate("scrollTo(0, 0)")  # the chat out of sight, below the table
    await line(bob, "Hi Bob, ready to lose?").wait_for(state="attached")
    assert "Ann: Hi Bob, ready to lose?" in (
        await line(bob, "Hi Bob, ready to lose?").text_content() or ""
    ).replace(" :", ":")
    # A canned line: Bob presses Good luck.
    await bob.locator(".chat-quick button", has_text="Good luck").click()
    await line(ann, "Good luck!").wait_for(state="attached")
    await line(carol, "Good luck!").wait_for(state="attached")
    # The spectator writes too, and is marked as watching.
    await say(carol, "Nice table")
    carols = line(ann, "Nice table")
    await carols.wait_for(state="attached")
    assert "watching" in (await carols.locator(".badge").text_content() or "")
    # Markup is shown as the text it is: no image, no script.
    await say(bob, XSS)
    shown = line(ann, XSS)
    await shown.wait_for(state="attached")
    assert XSS in (await shown.locator(".chat-text").text_content() or "")
    for page in (ann, bob, carol):
        assert await page.locator(".chat-lines img").count() == 0
    assert native == []
    # Ann, looking at the table, has three lines to read (her own is not news).
    assert await ann.locator("#chat-jump .unread").text_content() == "3"
    # Lines are not repeated in the table log; newest at the bottom, in order.
    assert "Nice table" not in (await ann.locator(".events").text_content() or "")
    texts = await ann.locator(".chat-lines .chat-text").all_text_contents()
    assert texts == ["Hi Bob, ready to lose?", "Good luck!", "Nice table", XSS]
    # The list is scrolled to its newest line.
    await ann.locator("#chat-jump").click()
    await wait_until(
        ann,
        "(() => { const l = document.querySelector('.chat-lines');"
        " return l.scrollTop + l.clientHeight >= l.scrollHeight - 2; })()",
    )
    assert await ann.evaluate("document.activeElement.id") == "chat-input"
    await ann.locator("#chat-jump .unread").wait_for(state="detached")
    await settled(ann)
    await screenshot(ann, "table-chat", full=False)


async def test_too_many_lines_at_once_are_refused_in_words(new_page) -> None:
    ann = await new_page("Ann")
    await create_table(ann, "Fast talker", seats=2)
    for n in range(5):
        await say(ann, f"line {n}")
    field = ann.locator("#chat-input")
    await field.fill("one too many")
    await field.press("Enter")
    await ann.locator(".toast", has_text="Slow down: you can write again in").wait_for()
    # What was typed stays, to send again.
    assert await field.input_value() == "one too many"


async def test_a_line_sent_while_the_last_is_on_its_way_goes_after_it(
    new_page, server: GameServer, monkeypatch
) -> None:
    """A player who presses Enter on the next line before the last one's answer came back: the
    line goes once that answer is in, after it. The client dropped it without a word (the text
    stayed in the field, unsent); a quick typist met it, and so did a test that typed the next
    line once the last one showed, its answer a message behind. Here the server answers each
    line 0.3 s late, so the second Enter always comes while the first is on its way."""
    handle = server.node.handle

    async def slowly(client: Any, message: Any) -> None:
        if isinstance(message, v1.Say):
            await asyncio.sleep(0.3)
        await handle(client, message)

    monkeypatch.setattr(server.node, "handle", slowly)
    ann = await new_page("Ann")
    await create_table(ann, "Quick typist", seats=2)
    field = ann.locator("#chat-input")
    await field.fill("first line")
    await field.press("Enter")
    await field.fill("second line")
    await field.press("Enter")
    await line(ann, "second line").wait_for(state="attached")
    texts = await ann.locator(".chat-lines .chat-line .chat-text").all_text_contents()
    assert [t for t in texts if t.endswith(" line")] == ["first line", "second line"]
    await wait_until(ann, "document.querySelector('#chat-input').value === ''")


async def test_a_muted_player_stays_muted_after_a_reload(new_page) -> None:
    ann = await new_page("Ann")
    bob = await new_page("Bob")
    await create_table(ann, "Mute table", seats=3)
    await join_from_lobby(bob, "Mute table")
    bob_id = await player_id(bob)
    await say(bob, "first from Bob")
    await line(ann, "first from Bob").wait_for()
    await say(ann, "hello from Ann")
    # No mute for one's own lines.
    assert await line(ann, "hello from Ann").locator("button.chat-name").count() == 0
    # Ann mutes Bob from his name's menu.
    await line(ann, "first from Bob").locator("button.chat-name").click()
    await ann.locator(".chat-menu").get_by_role("button", name="Mute Bob").click()
    await line(ann, "first from Bob").wait_for(state="hidden")
    muted = ann.locator(".chat-muted")
    await muted.wait_for()
    assert "Bob" in (await muted.text_content() or "")
    # His next line arrives but is not shown, nor counted as news.
    await say(bob, "second from Bob")
    await wait_until(
        ann,
        "window.blackdrez.table().chat.some((n) => n.event.text === 'second from Bob')",
    )
    assert not await line(ann, "second from Bob").is_visible()
    assert await ann.locator("#chat-jump .unread").count() == 0
    # Kept on this browser: after a reload the earlier lines are back (the snapshot's chat),
    # Bob's still hidden.
    await ann.reload()
    await ann.locator("#status[data-state=open]").wait_for()
    await line(ann, "hello from Ann").wait_for()
    await line(ann, "second from Bob").wait_for(state="attached")
    assert not await line(ann, "first from Bob").is_visible()
    assert not await line(ann, "second from Bob").is_visible()
    stored = await ann.evaluate("localStorage.getItem('blackdrez.muted')")
    assert bob_id in (stored or "")
    # Unmuting shows his lines again.
    await ann.locator(".chat-muted").get_by_role("button", name="Unmute Bob").click()
    await line(ann, "first from Bob").wait_for()
    await line(ann, "second from Bob").wait_for()
    assert await ann.locator(".chat-muted").is_hidden()


async def test_the_host_sends_a_spectator_away(new_page) -> None:
    ann = await new_page("Ann")
    carol = await new_page("Carol")
    await create_table(ann, "Rail table", seats=3)
    await watch_from_lobby(carol, "Rail table")
    await say(carol, "hi from the rail")
    spectator_line = line(ann, "hi from the rail")
    await spectator_line.wait_for()
    await spectator_line.locator("button.chat-name").click()
    await ann.locator(".chat-menu").get_by_role("button", name="Remove Carol").click()
    await answer(ann, yes=True)
    # Carol is told, in words, and lands in the lobby.
    await carol.locator(".toast", has_text="The host sent you away from this table").wait_for()
    await carol.locator(".lobby").wait_for()
    assert await carol.locator(".blackdrez").count() == 0
    # The host's log says so.
    await ann.locator(".events li", has_text="sent Carol away").wait_for()
    # Watching again is refused, in words.
    await (
        carol.locator(".table-row", has_text="Rail table")
        .get_by_role("button", name="Watch")
        .click()
    )
    await carol.locator(".toast", has_text="cannot watch it again").wait_for()


async def test_a_table_can_keep_its_chat_to_its_players(new_page) -> None:
    ann = await new_page("Ann")
    box = ann.locator("#create input[name=spectator_chat]")
    assert await box.is_checked(), "spectators may chat unless the host says otherwise"
    await ann.locator("#create label", has_text="Spectators may chat").click()
    assert not await box.is_checked()
    await create_table(ann, "Quiet rail", seats=3)
    carol = await new_page("Carol")
    await watch_from_lobby(carol, "Quiet rail")
    field = carol.locator("#chat-input")
    assert await field.is_disabled()
    reason = carol.locator(".chat-closed")
    await reason.wait_for()
    assert "spectators" in (await reason.text_content() or "").lower()
    assert await carol.locator(".chat-quick button").first.is_disabled()
    # The players still write, and the spectator reads them.
    assert await ann.locator("#chat-input").is_enabled()
    await say(ann, "players only here")
    await line(carol, "players only here").wait_for()


async def test_on_a_phone_the_chat_is_usable_below_the_action_bar(new_page, screenshot) -> None:
    ann = await new_page("Ann", width=390, height=844)
    bob = await new_page("Bob")
    await seat_up(bob, ann, "Pocket chat", max_rounds=None)
    # The title row has no room for a Chat button on a phone.
    assert await ann.locator("#chat-jump").is_hidden()
    # With the chat folded, a new line is counted: on its head, and on a tab of the action bar
    # (in sight wherever the page is scrolled) that leads to the chat.
    await ann.locator(".chat summary").click()
    await ann.evaluate("scrollTo(0, 0)")
    await say(bob, "Your move, Ann")
    pill = ann.locator(".action-bar .chat-pill")
    await pill.wait_for()
    assert await pill.text_content() == "Chat: 1 new line"
    assert "1 new line" in (await ann.locator(".chat summary").text_content() or "")
    pill_box = await pill.bounding_box()
    assert pill_box is not None and pill_box["y"] + pill_box["height"] <= 844, pill_box
    await pill.click()
    await wait_until(ann, "document.activeElement.id === 'chat-input'")
    await pill.wait_for(state="hidden")
    field = ann.locator("#chat-input")
    await field.scroll_into_view_if_needed()
    box = await field.bounding_box()
    bar = await ann.locator(".action-bar").bounding_box()
    assert box is not None and bar is not None
    assert box["y"] >= 0 and box["y"] + box["height"] <= 844, box
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    overlap = box["y"] < bar["y"] + bar["height"] and bar["y"] < box["y"] + box["height"]
    assert not overlap, (box, bar)
    send = await ann.locator("#chat-send").bounding_box()
    assert send is not None and send["x"] + send["width"] <= 390, send
    # What is being typed survives a new line arriving (the table is drawn again).
    await field.type("Thinking")
    await say(bob, "Take your time")
    await line(ann, "Take your time").wait_for()
    await field.type(" about it")
    assert await field.input_value() == "Thinking about it"
    await field.press("Enter")
    await line(bob, "Thinking about it").wait_for()
    await ann.locator(".chat-quick button", has_text="Well played").click()
    await line(ann, "Well played!").wait_for()
    await ann.locator(".chat").evaluate("(chat) => chat.scrollIntoView({ block: 'end' })")
    await settled(ann)
    await screenshot(ann, "table-chat-phone", full=False)


async def test_a_line_reported_goes_to_the_operators_with_the_reason(new_page, server) -> None:
    """A player opens the menu of another's line, reports it with a reason typed in the page's
    own dialog; the operators' store has it (the admin view lists it), nobody else is told."""
    ann = await new_page("Ann")
    bob = await new_page("Bob")
    await seat_up(ann, bob, "Reported table", max_rounds=None)
    await say(bob, "you play like a potato")
    await line(ann, "you play like a potato").wait_for(state="attached")
    await line(ann, "you play like a potato").get_by_role("button", name="Bob").click()
    await ann.locator("[data-key=chat-report]").click()
    await ann.locator("dialog.ask #ask-field").fill("insults")
    await ann.locator("dialog.ask #ask-yes").click()
    await ann.locator(".toast", has_text="Reported").wait_for()
    reports = [
        msgspec.msgpack.decode(data, type=ChatReport)
        for data in await server.store.reports.recent(10)
    ]
    mine = [r for r in reports if r.line.text == "you play like a potato"]
    assert len(mine) == 1 and mine[0].reason == "insults" and mine[0].reporter_name == "Ann"
    assert await bob.locator(".toast", has_text="Report").count() == 0
