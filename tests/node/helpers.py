"""BlackDrez play for the node harness's scenarios: seat a table, play whoever is on turn."""

from __future__ import annotations

from typing import Any

import msgspec

from blackdrez.games.blackdrez import bots, rules
from blackdrez.protocol import v1
from blackdrez.server.testing.node_harness import Cluster, FakeClient


async def seat_and_start(
    cluster: Cluster, host: FakeClient, others: list[FakeClient], **options: Any
) -> str:
    """``host`` creates a table, ``others`` sit down (with its invite if private), everyone is
    ready and the host starts; the table's id."""
    options.setdefault("seats", 1 + len(others))
    options.setdefault("round_pause_seconds", 0.0)
    joined = await host.ok(v1.CreateTable(options=v1.TableOptions(**options)))
    table = joined.table.id
    for other in others:
        await other.ok(v1.JoinTable(table=table, invite=joined.invite))
    for player in [host, *others]:
        await player.ok(v1.SetReady(table=table))
    await host.ok(v1.StartGame(table=table))
    await cluster.settle()
    return table


def on_turn(players: list[FakeClient], table: str) -> FakeClient | None:
    """The player who may act at ``table`` now, if any."""
    return next((p for p in players if p.table(table).legal), None)


def bot_action(player: FakeClient, table: str) -> dict[str, Any]:
    """What the reference threshold bot plays in ``player``'s seat."""
    seen = player.table(table)
    view = msgspec.convert(seen.view, rules.View)
    legal = [msgspec.convert(action, rules.Action) for action in seen.legal]
    action: dict[str, Any] = msgspec.to_builtins(bots.threshold(view, legal))
    return action


async def act_once(
    cluster: Cluster, players: list[FakeClient], table: str
) -> tuple[FakeClient, v1.Ok]:
    """Whoever is on turn plays one move with the reference bot: them and the ``ok``."""
    await cluster.until(lambda: on_turn(players, table) is not None, "someone on turn")
    mover = on_turn(players, table)
    assert mover is not None
    ok = await mover.ok(v1.Act(table=table, action=bot_action(mover, table)))
    await cluster.settle()
    return mover, ok


def phase(player: FakeClient, table: str) -> str | None:
    """The game's phase in ``player``'s view of ``table``."""
    view = player.table(table).view
    return None if view is None else view["phase"]


async def play_out(
    cluster: Cluster, players: list[FakeClient], table: str, limit: int = 500
) -> int:
    """Play until the game at ``table`` is over; the moves played."""
    for moves in range(limit):
        if phase(players[0], table) == "over":
            return moves
        await act_once(cluster, players, table)
    raise AssertionError(f"the game at {table} did not end in {limit} moves")
