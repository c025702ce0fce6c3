"""A finished solitaire session says what perfect play would have scored on its deal (par).

Through the in-memory table harness: the ``par`` table event follows ``game_over``, never falls
below the player's score, and a room rebuilt from its log emits the same one.
"""

from __future__ import annotations

import msgspec

from blackdrez.games import GAMES
from blackdrez.games.blackjack_piles import rules as blackjack_piles
from blackdrez.games.blackjack_piles.bots import greedy
from blackdrez.games.blue_jacket import rules as blue_jacket
from tests.server.harness import FakeClient, TableHarness


def _session(game: str) -> tuple[TableHarness, FakeClient]:
    harness = TableHarness(game=game)
    player = harness.client("host")
    player.join()
    player.start()
    return harness, player


def _par(client: FakeClient) -> dict:
    assert client.event_types[-2:] == ["game_over", "par"]
    return client.events[-1].event


def test_a_resigned_blue_jacket_deal_shows_its_par_beside_the_score() -> None:
    harness, player = _session("blue_jacket")
    player.act(blue_jacket.Resign())
    par = _par(player)
    assert par["score"] == player.view["score"]
    assert par["par"] >= par["score"] and par["rounds"] == []
    assert par["exact"] is True and par["par"] == 104  # a winnable deal (most are)
    assert harness.replayed().log.kept_events()[-1].event == par  # the wire form


def test_a_blackjack_piles_game_shows_the_par_of_every_round_it_played() -> None:
    harness, player = _session("blackjack_piles")
    while player.legal:
        view = msgspec.convert(player.view, blackjack_piles.View)
        legal = [msgspec.convert(a, blackjack_piles.Action) for a in player.legal]
        player.act(greedy(view, legal))
    par = _par(player)
    results = player.view["results"]
    assert [item["round"] for item in par["rounds"]] == [r["round"] for r in results]
    for item, result in zip(par["rounds"], results, strict=True):
        assert item["score"] == result["score"] and item["par"] >= item["score"]
    assert par["score"] == player.view["score"] == sum(r["score"] for r in results)
    assert par["par"] == sum(item["par"] for item in par["rounds"]) >= par["score"]
    assert harness.replayed().log.kept_events()[-1].event == par  # the wire form


def test_a_blackdrez_game_has_no_par() -> None:
    assert GAMES["blackdrez"].par(object()) is None
