"""Friends across nodes on the virtual clock (issue 37): follow a player and see where they are
(online, playing, offline once gone); challenge them wherever they are connected, and on accept
both sit at a new table of two, its game started; a decline is told; a block refuses their
challenges and ends the follow; a flood of challenges is refused past a few; a challenge is
answered once, and only by whom it was sent to; one accepted while its sender's node is dead
waits for them."""

from __future__ import annotations

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.node.friends import CHALLENGE_BURST, SEEN_EVERY, SEEN_TTL
from blackdrez.server.testing.node_harness import Cluster, FakeClient, on_nodes
from tests.node.helpers import play_out


def pushed(client: FakeClient, kind: type) -> list:
    return [m for m in client.pushed if isinstance(m, kind)]


def status_of(friends: v1.Friends, player: str) -> str:
    return next(f.status for f in friends.following if f.player == player)


@on_nodes(2)
async def test_following_shows_where_a_player_is(cluster: Cluster) -> None:
    a, b = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(b, "Bob")
    await cluster.settle()
    await ann.ok(v1.Follow(player=bob.player))
    friends = await ann.ok(v1.GetFriends())
    assert [(f.name, f.status) for f in friends.following] == [("Bob", "online")]
    table = (await bob.ok(v1.CreateTable())).table.id
    await cluster.advance(SEEN_EVERY + 1.0)
    friends = await ann.ok(v1.GetFriends())
    assert (status_of(friends, bob.player), friends.following[0].table) == ("playing", table)
    assert [f.name for f in (await bob.ok(v1.GetFriends())).following] == [], "one-way"
    await bob.leave()
    await cluster.settle()
    assert status_of(await ann.ok(v1.GetFriends()), bob.player) == "offline"


@on_nodes(2)
async def test_a_player_whose_node_died_shows_offline_within_a_minute(cluster: Cluster) -> None:
    a, b = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(b, "Bob")
    await cluster.settle()
    await ann.ok(v1.Follow(player=bob.player))
    cluster.kill(b)
    await cluster.advance(SEEN_TTL + 1.0)
    assert status_of(await ann.ok(v1.GetFriends()), bob.player) == "offline"


@on_nodes(2)
async def test_a_challenge_accepted_seats_both_at_a_new_table(cluster: Cluster) -> None:
    a, b = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(b, "Bob")
    await cluster.settle()
    sent = await ann.ok(v1.Challenge(player=bob.player))
    await cluster.until(lambda: pushed(bob, v1.Challenged), "Bob is told on his node")
    told = pushed(bob, v1.Challenged)[0]
    assert (told.challenge, told.name, told.rated) == (sent.challenge, "Ann", False)
    await bob.ok(v1.AnswerChallenge(challenge=sent.challenge, accept=True))
    await cluster.until(
        lambda: pushed(ann, v1.MatchFound) and pushed(bob, v1.MatchFound), "both told"
    )
    found = {c.player: pushed(c, v1.MatchFound)[0] for c in (ann, bob)}
    table = found[ann.player].table
    assert found[bob.player].table == table and found[ann.player].players == ["Ann", "Bob"]
    for client in (ann, bob):
        await client.ok(v1.JoinTable(table=table))
    await cluster.until(lambda: ann.table(table).info.status == "playing", "the game starts")
    again = await bob.request(v1.AnswerChallenge(challenge=sent.challenge, accept=True))
    assert isinstance(again, v1.Error) and again.code == ErrorCode.NOT_FOUND, "answered once"


@on_nodes(2)
async def test_a_declined_challenge_is_told_and_only_its_player_may_answer(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(b, "Bob")
    cat = await cluster.connect(b, "Cat")
    await cluster.settle()
    sent = await ann.ok(v1.Challenge(player=bob.player))
    stolen = await cat.request(v1.AnswerChallenge(challenge=sent.challenge, accept=True))
    assert isinstance(stolen, v1.Error) and stolen.code == ErrorCode.NOT_FOUND
    await bob.ok(v1.AnswerChallenge(challenge=sent.challenge, accept=False))
    await cluster.until(lambda: pushed(ann, v1.ChallengeAnswered), "Ann is told")
    assert not pushed(ann, v1.ChallengeAnswered)[0].accepted
    assert not pushed(ann, v1.MatchFound) and not pushed(cat, v1.MatchFound)


@on_nodes(2)
async def test_a_block_refuses_challenges_and_ends_the_follow(cluster: Cluster) -> None:
    a, b = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(b, "Bob")
    await cluster.settle()
    await bob.ok(v1.Follow(player=ann.player))
    await bob.ok(v1.Block(player=ann.player))
    friends = await bob.ok(v1.GetFriends())
    assert friends.following == [] and [f.name for f in friends.blocked] == ["Ann"]
    refused = await ann.request(v1.Challenge(player=bob.player))
    assert isinstance(refused, v1.Error) and refused.code == ErrorCode.CHALLENGE_REFUSED
    await cluster.settle()
    assert not pushed(bob, v1.Challenged), "Bob hears nothing of it"
    await bob.ok(v1.Unblock(player=ann.player))
    await ann.ok(v1.Challenge(player=bob.player))


@on_nodes(1)
async def test_a_flood_of_challenges_is_refused_past_a_few(cluster: Cluster) -> None:
    (a,) = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(a, "Bob")
    await cluster.settle()
    answers = [await ann.request(v1.Challenge(player=bob.player)) for _ in range(10)]
    refused = [m for m in answers if isinstance(m, v1.Error)]
    assert len(answers) - len(refused) == CHALLENGE_BURST
    assert all(e.code == ErrorCode.RATE_LIMITED and e.retry_after for e in refused)
    await cluster.settle()
    assert len(pushed(bob, v1.Challenged)) == CHALLENGE_BURST, "Bob is not flooded"
    offline = await ann.request(v1.Challenge(player="p_nobody"))
    assert isinstance(offline, v1.Error)


@on_nodes(1)
async def test_nobody_follows_blocks_or_challenges_themselves(cluster: Cluster) -> None:
    (a,) = cluster.nodes
    ann = await cluster.connect(a, "Ann")
    for message in (
        v1.Follow(player=ann.player),
        v1.Block(player=ann.player),
        v1.Challenge(player=ann.player),
    ):
        refused = await ann.request(message)
        assert isinstance(refused, v1.Error) and refused.code == ErrorCode.BAD_MESSAGE
    unknown = await ann.request(v1.Follow(player="p_nobody"))
    assert isinstance(unknown, v1.Error) and unknown.code == ErrorCode.NOT_FOUND


@on_nodes(2)
async def test_a_challenge_accepted_while_the_challengers_node_is_dead_waits_for_them(
    cluster: Cluster,
) -> None:
    """Ann challenges Bob, and her node dies before he answers. His accept still makes the
    table (the challenge is in the store, not on her node), Bob is told; Ann, connected again
    on the living node within the grace, finds her seat there and the game is played."""
    a, b = cluster.nodes
    ann, bob = await cluster.connect(a, "Ann"), await cluster.connect(b, "Bob")
    await cluster.settle()
    sent = await ann.ok(v1.Challenge(player=bob.player))
    await cluster.until(lambda: pushed(bob, v1.Challenged), "Bob is told on his node")
    cluster.kill(a)
    await bob.ok(v1.AnswerChallenge(challenge=sent.challenge, accept=True))
    await cluster.until(lambda: pushed(bob, v1.MatchFound), "Bob told")
    table = pushed(bob, v1.MatchFound)[0].table
    await cluster.advance(5.0)
    ann = await cluster.reconnect(ann, b)
    assert table in ann.seated, "her seat is kept for her"
    for client in (ann, bob):
        await client.ok(v1.JoinTable(table=table))
    await cluster.until(lambda: ann.table(table).info.status == "playing", "the game starts")
    await play_out(cluster, [ann, bob], table)
