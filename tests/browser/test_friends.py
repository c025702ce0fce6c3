"""Friends in the browser: a player follows another from their profile page or a chat line's
menu, sees them online in the lobby's Friends panel and challenges them; the challenged player
accepts from the card at the top of their page and both land on the same table, playing. A
player blocked (from their profile page) has their challenges refused in words and their chat
lines hidden; a declined challenge is told to the challenger."""

from __future__ import annotations

import re

from playwright.async_api import Page

from tests.browser.helpers import create_table, no_sideways_scroll, wait_until
from tests.browser.test_blackdrez_table import join_from_lobby
from tests.browser.test_table_chat import line, player_id, say

TABLE_URL = re.compile(r"#/table/([^/#?]+)$")
PATIENCE_MS = 20_000
ANNOUNCED = "document.getElementById('announce').textContent"


def table_in(url: str) -> str | None:
    found = TABLE_URL.search(url)
    return found.group(1) if found else None


async def open_profile(page: Page, player: str) -> None:
    """Go to ``player``'s profile page by its address (a new entry of the history)."""
    await page.evaluate(f"location.hash = '#/player/{player}'")
    await page.locator(".follow-bar button").first.wait_for()


async def follow_from_profile(page: Page, player: str) -> None:
    await open_profile(page, player)
    bar = page.locator(".follow-bar")
    await bar.get_by_role("button", name=re.compile(r"^Follow ")).click()
    await bar.get_by_role("button", name=re.compile(r"^Unfollow ")).wait_for()


def friend_row(page: Page, name: str):
    return page.locator(".friends-panel .friend-row", has_text=name)


async def test_ann_follows_bob_challenges_him_and_both_play_at_one_table(
    new_page, screenshot
) -> None:
    ann = await new_page("Ann", width=1280, height=800)
    bob = await new_page("Bob", width=390, height=844)
    for page in (ann, bob):
        page.set_default_timeout(PATIENCE_MS)
    await ann.locator(".friends-panel .empty", has_text="You follow nobody yet").wait_for()
    await follow_from_profile(ann, await player_id(bob))
    # Back to the lobby: Bob is listed, online, with a Challenge button.
    await ann.go_back()
    row = friend_row(ann, "Bob")
    await row.locator(".friend-status", has_text="Online").wait_for()
    await screenshot(ann, "friends-panel", full=False)
    await row.get_by_role("button", name="Challenge Bob").click()
    await ann.locator(".toast", has_text="Challenge sent to Bob").wait_for()

    card = bob.locator(".challenge-card", has_text="Ann challenges you to a casual game")
    await card.wait_for()
    await card.locator(".challenge-left", has_text=re.compile(r"\d+ s left")).wait_for()
    await wait_until(bob, f"{ANNOUNCED}.startsWith('Ann challenges you to a casual game')")
    await screenshot(bob, "friends-challenged-phone", full=False)
    await no_sideways_scroll(bob, 390)
    accept = card.get_by_role("button", name="Accept")
    await accept.focus()  # reachable by keyboard
    await bob.keyboard.press("Enter")
    await card.wait_for(state="detached")

    for page, other in ((ann, "Bob"), (bob, "Ann")):
        await page.locator(".toast", has_text=f"Challenge on: you and {other}").wait_for()
    for page in (ann, bob):
        await page.locator(".blackdrez .seat.mine").wait_for()
        await wait_until(page, "window.blackdrez.table()?.info?.status === 'playing'", 15000)
    table = table_in(ann.url)
    assert table is not None and table_in(bob.url) == table, (ann.url, bob.url)
    for page, other in ((ann, "Bob"), (bob, "Ann")):
        await page.locator(".blackdrez .seat", has_text=other).wait_for()
    await screenshot(bob, "friends-table-phone", full=False)


async def test_a_blocked_player_cannot_challenge_and_their_lines_are_hidden(
    new_page, screenshot
) -> None:
    ann = await new_page("Ann", width=1280, height=800)
    bob = await new_page("Bob", width=390, height=844)
    for page in (ann, bob):
        page.set_default_timeout(PATIENCE_MS)
    await create_table(ann, "Block table", seats=3)
    await join_from_lobby(bob, "Block table")
    await say(bob, "hi from Bob")
    await say(ann, "hello from Ann")
    await line(bob, "hello from Ann").wait_for()
    # Ann follows Bob from his name's menu in the chat.
    await line(ann, "hi from Bob").locator("button.chat-name").click()
    await ann.locator(".chat-menu").get_by_role("button", name="Follow Bob").click()
    await ann.locator(".toast", has_text="You follow Bob").wait_for()
    # Bob blocks Ann from her profile page (no finished game yet: her name from the table).
    await open_profile(bob, await player_id(ann))
    await bob.locator(".records h2", has_text="Ann").wait_for()
    await bob.get_by_role("button", name="Block Ann").click()
    await bob.get_by_role("button", name="Unblock Ann").wait_for()
    assert await bob.get_by_role("button", name="Follow Ann").count() == 0
    await screenshot(bob, "friends-profile-phone", full=False)
    # Back at the table, her lines are hidden (the server's list: not this browser's mutes).
    await bob.go_back()
    await line(bob, "hi from Bob").wait_for()
    assert not await line(bob, "hello from Ann").is_visible()
    await bob.locator(".chat-muted", has_text="from Ann (blocked)").wait_for()
    assert await bob.evaluate("localStorage.getItem('blackdrez.muted')") in (None, "{}")
    await say(ann, "second from Ann")
    await wait_until(
        bob, "window.blackdrez.table().chat.some((n) => n.event.text === 'second from Ann')"
    )
    assert not await line(bob, "second from Ann").is_visible()
    await screenshot(bob, "friends-blocked-chat-phone", full=False)
    # Ann's challenge is refused in words.
    await ann.locator(".top h1 a").click()
    await friend_row(ann, "Bob").get_by_role("button", name="Challenge Bob").click()
    await ann.locator(".toast", has_text="Bob does not take your challenges").wait_for()
    assert await bob.locator(".challenge-card").count() == 0
    # Bob's Friends panel lists Ann as blocked, with Unblock.
    await bob.locator(".top h1 a").click()
    blocked = bob.locator(".friends-panel .blocked-row", has_text="Ann")
    await blocked.get_by_role("button", name="Unblock Ann").wait_for()
    await blocked.scroll_into_view_if_needed()
    await screenshot(bob, "friends-panel-phone", full=False)
    await no_sideways_scroll(bob, 390)


async def test_a_declined_challenge_is_told_to_the_challenger(new_page) -> None:
    ann = await new_page("Ann")
    bob = await new_page("Bob")
    for page in (ann, bob):
        page.set_default_timeout(PATIENCE_MS)
    await follow_from_profile(ann, await player_id(bob))
    await ann.go_back()
    row = friend_row(ann, "Bob")
    await row.get_by_label("Rated challenge to Bob").check()
    await row.get_by_role("button", name="Challenge Bob").click()
    card = bob.locator(".challenge-card", has_text="Ann challenges you to a rated game")
    await card.get_by_role("button", name="Decline").click()
    await card.wait_for(state="detached")
    await ann.locator(".toast", has_text="Bob declined your challenge").wait_for()
    await bob.locator(".toast", has_text="You declined Ann's challenge").wait_for()
    assert table_in(ann.url) is None and table_in(bob.url) is None
