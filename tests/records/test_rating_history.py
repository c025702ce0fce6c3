"""Ratings as people read them: the 1500 scale (one definition here, its twin in the browser),
each rated game's change in the history, and the profile figures that would otherwise disagree
(a daily deal's game counted at once but listed only once its UTC day has ended)."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import msgspec

from blackdrez.server.records import ratings
from blackdrez.server.records.api import Leaderboard, PlayerProfile, RatingHistory, RecordsApi
from blackdrez.server.records.ratings import INITIAL, display
from blackdrez.server.records.store import RecordsStore
from tests.records.games import finished

ROOT = Path(__file__).resolve().parents[2]
SCALE_JS = ROOT / "clients" / "browser" / "scale.js"
ORDINALS = [
    -1000.0, -70.1, -70.0, -69.99, -12.345, -1.8330937337715376, -0.025, -0.0249, 0.0,
    INITIAL.ordinal, 0.025, 0.0125, 1e-9, 3.437685252509457, 10.0, 12.975, 17.5, 25.0, 29.99,
    50.0, 123.456,
]  # fmt: skip


def test_a_new_player_shows_1500_and_no_one_shows_a_negative_number() -> None:
    assert display(0.0) == 1500
    assert display(INITIAL.ordinal) == 1500, "a new player (mu 25, sigma 25/3)"
    assert display(3.437685252509457) == 1569, "after winning a first two-player game"
    assert display(-1.8330937337715376) == 1463, "after losing it"
    assert display(25.0) == 2000, "a good regular (mu about 30, sigma about 1.7)"
    assert display(-1000.0) == ratings.DISPLAY_FLOOR == 100
    assert all(display(o) >= 100 for o in ORDINALS)
    assert [display(o) for o in sorted(ORDINALS)] == sorted(display(o) for o in ORDINALS)
    assert display(0.025) == 1501 and display(-0.025) == 1500, "halves round up, as in JS"


def test_the_browser_shows_the_same_numbers() -> None:
    node = shutil.which("node")
    # Node.js comes with the machine image (.ci/run): without it this fails, it does not skip
    assert node is not None, "no node to run the browser's scale module"
    script = (
        f"import {{ ratingDisplay, ratingChange }} from {SCALE_JS.as_uri()!r};"
        f"const ordinals = {json.dumps(ORDINALS)};"
        "console.log(JSON.stringify({shown: ordinals.map(ratingDisplay),"
        " changes: ordinals.map((o, i) => ratingChange(ordinals[(i + 1) % ordinals.length], o))}));"
    )
    out = subprocess.run(
        [node, "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    found = json.loads(out)
    assert found["shown"] == [display(o) for o in ORDINALS]
    assert found["changes"] == [
        ratings.change(ORDINALS[(i + 1) % len(ORDINALS)], o) for i, o in enumerate(ORDINALS)
    ]


async def test_each_rated_games_point_says_how_the_shown_rating_moved(
    store: RecordsStore,
) -> None:
    for number in range(3):
        await store.put_game(
            finished(f"g{number}", seed=f"s{number}", rated=True, ended_at=100.0 + number)
        )
    api = RecordsApi(store)
    response = await api.handle("GET", "/api/v1/players/p0/ratings")
    history = msgspec.json.decode(response.body, type=RatingHistory)
    points = history.ratings
    assert len(points) == 3
    for point in points:
        assert point.display_before == display(point.mu_before - 3 * point.sigma_before)
        assert point.display == display(point.ordinal)
        assert point.change == point.display - point.display_before
    oldest = points[-1]
    assert oldest.display_before == 1500 and oldest.change != 0
    for newer, older in itertools.pairwise(points):
        assert newer.display_before == older.display, "the changes add up"
    assert sum(p.change for p in points) == points[0].display - 1500
    raw = json.loads(response.body)["ratings"][0]
    assert {"display_before", "display", "change"} <= set(raw)

    response = await api.handle("GET", "/api/v1/players/p0")
    profile = msgspec.json.decode(response.body, type=PlayerProfile)
    (stat,) = profile.stats
    assert stat.rating is not None
    assert stat.rating.display == display(stat.rating.ordinal) == points[0].display
    assert [p.change for p in profile.ratings] == [p.change for p in points]

    response = await api.handle("GET", "/api/v1/leaderboards/blackdrez")
    board = msgspec.json.decode(response.body, type=Leaderboard)
    assert board.entries
    for entry in board.entries:
        assert entry.rating is not None
        assert entry.rating.display == display(entry.rating.ordinal)


async def test_a_profile_says_which_daily_games_it_counts_before_listing_them(
    store: RecordsStore,
) -> None:
    """A daily deal's game counts in the stats at once, but is listed (and served) only once its
    UTC day has ended: the stats say how many are not listed yet, and when they will be."""
    day_ends = 1_700_006_400.0
    now = [day_ends - 3600.0]
    store.clock = lambda: now[0]
    daily = finished("daily", "blue_jacket", players=["ann"], ended_at=now[0] - 60.0,
                     sealed_until=day_ends)  # fmt: skip
    other = finished("other", "blue_jacket", players=["ann"], ended_at=now[0] - 30.0)
    piles = finished("piles", "blackjack_piles", players=["ann"], ended_at=now[0] - 20.0)
    for game in (daily, other, piles):
        assert await store.put_game(game)
    api = RecordsApi(store)

    async def stats() -> dict[str, object]:
        response = await api.handle("GET", "/api/v1/players/ann")
        profile = msgspec.json.decode(response.body, type=PlayerProfile)
        return {s.game: (s.games, s.sealed, s.sealed_until) for s in profile.stats}

    assert await stats() == {"blue_jacket": (2, 1, day_ends), "blackjack_piles": (1, 0, None)}
    now[0] = day_ends
    assert await stats() == {"blue_jacket": (2, 0, None), "blackjack_piles": (1, 0, None)}
