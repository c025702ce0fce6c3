"""A player's connections across nodes: one live connection per player, sign-out everywhere,
and what a node whose bus was down missed about them."""

from __future__ import annotations

from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.server import identity
from blackdrez.server.testing.node_harness import Cluster, on_nodes


@on_nodes(2)
async def test_signing_out_everywhere_closes_the_older_tokens_on_every_node(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    player = identity.new_player_id()
    old = identity.issue_token(cluster.secret, player, "Account", cluster.clock.time(), 1)
    client = await cluster.connect(a, token=old)
    other = await cluster.connect(b, "Bystander")
    await b.spawn(b.node.sign_out_everywhere(player, 2))
    await cluster.settle()
    assert client.closed and client.close_code == CloseCode.SIGNED_OUT
    assert not other.closed


@on_nodes(2)
async def test_a_node_whose_bus_was_down_closes_what_was_replaced_or_signed_out_meanwhile(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    first = await cluster.connect(a, "Player")
    await first.ok(v1.Ping())
    account = identity.new_player_id()
    signed = identity.issue_token(cluster.secret, account, "Account", cluster.clock.time(), 1)
    holder = await cluster.connect(a, token=signed)
    cluster.cut_bus(a)
    await cluster.connect(b, token=first.token)  # the replacement's news is lost to node a
    cluster.records.generations[account] = 2
    await b.spawn(b.node.sign_out_everywhere(account, 2))  # and so is the sign-out
    await cluster.settle()
    assert not first.closed and not holder.closed
    await cluster.restore_bus(a)
    await cluster.settle()
    assert first.closed and first.close_code == CloseCode.REPLACED
    assert holder.closed and holder.close_code == CloseCode.SIGNED_OUT


@on_nodes(1)
async def test_a_request_that_fails_inside_the_node_is_answered_internal(cluster: Cluster) -> None:
    (a,) = cluster.nodes
    client = await cluster.connect(a, "Client")

    async def broken() -> list[v1.TableInfo]:
        raise RuntimeError("a bug")

    a.node.lobby.list_tables = broken  # type: ignore[method-assign]
    failed = await client.request(v1.ListTables())
    assert isinstance(failed, v1.Error) and failed.code == ErrorCode.INTERNAL
    assert not client.closed
