"""Who a node cut from its store tells to move (``StoreLostNotices``): every connection once per
outage, those that connect during the outage included."""

from __future__ import annotations

from blackdrez.server.app import StoreLostNotices


def test_each_connection_is_told_once_per_outage_even_one_that_arrives_after_the_others() -> None:
    notices = StoreLostNotices()
    ann, bob, bob_again = object(), object(), object()
    assert notices.due(False, 1, {"ann": ann}) == []  # within the grace: nobody yet
    assert notices.due(True, 1, {"ann": ann}) == [ann]
    assert notices.due(True, 1, {"ann": ann}) == []  # once
    # Bob's session was set up after the node had told Ann (the race the three-host test met)
    assert notices.due(True, 1, {"ann": ann, "bob": bob}) == [bob]
    # Bob connected again (a newer connection of his): that one was not told
    assert notices.due(True, 1, {"ann": ann, "bob": bob_again}) == [bob_again]
    assert notices.due(True, 1, {"ann": ann, "bob": bob_again}) == []


def test_a_new_outage_tells_everyone_again_and_a_return_forgets() -> None:
    notices = StoreLostNotices()
    ann = object()
    assert notices.due(True, 1, {"ann": ann}) == [ann]
    assert notices.due(True, 2, {"ann": ann}) == [ann]  # the store came back and went again
    assert notices.due(False, 2, {"ann": ann}) == []
    assert notices.due(True, 2, {"ann": ann}) == [ann]  # reachable for a while in between
