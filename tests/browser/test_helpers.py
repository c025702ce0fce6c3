"""The browser helpers themselves work on a page under the server's Content-Security-Policy."""

from __future__ import annotations

from tests.browser.helpers import click_and_wait, table_state, wait_until


async def test_waiting_for_a_later_change_works_under_the_content_security_policy(new_page) -> None:
    """A condition that becomes true only after the first check is waited for without eval (which
    the policy forbids, and Playwright's wait_for_function uses once its first check fails)."""
    page = await new_page("Waiter", csp=True)
    await page.evaluate("setTimeout(() => { window.later = 1; }, 300)")
    await wait_until(page, "window.later === 1", timeout=5000)
    assert await page.evaluate("window.later") == 1


async def test_waiting_for_a_change_that_never_comes_times_out(new_page) -> None:
    page = await new_page("Waiter", csp=True)
    try:
        await wait_until(page, "window.never === 1", timeout=300)
    except TimeoutError as error:
        assert "window.never === 1" in str(error)
    else:
        raise AssertionError("the wait did not time out")


async def test_a_click_is_waited_for_past_a_presence_event_that_comes_first(new_page) -> None:
    """After a restart of the default server the player's presence events come in just after the
    snapshot: a click made then saw the table's number grow by a presence event, and the wait
    ended with the click's own result still on its way (CI: the stock's deal missing from the
    state the test then held). The wait ends on the click's result, not on an event beside it."""
    page = await new_page("Waiter", csp=True)
    await page.evaluate(
        """(() => {
        const t = { id: 'x', seq: 3, view: { moves: 1 }, legal: [], log: [] };
        window.blackdrez.table = () => t;
        const add = (seq, type, view) => { t.log.push({ seq, event: { type } }); t.seq = seq;
          if (view) t.view = view; };
        const button = document.createElement('button');
        button.id = 'fake-move';
        button.textContent = 'move';
        button.onclick = () => {
          setTimeout(() => add(4, 'presence'), 20);
          setTimeout(() => add(5, 'said'), 40);
          setTimeout(() => add(6, 'dealt', { moves: 2 }), 400);
        };
        document.body.prepend(button);
        })()"""
    )
    await click_and_wait(page, page.locator("#fake-move"))
    state = await table_state(page)
    assert (state["seq"], state["view"]) == (6, {"moves": 2})
