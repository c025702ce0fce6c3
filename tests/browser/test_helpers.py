"""The browser helpers themselves work on a page under the server's Content-Security-Policy."""

from __future__ import annotations

from tests.browser.helpers import wait_until


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
