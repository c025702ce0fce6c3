"""Accounts on SQLite and PostgreSQL: claim, log in elsewhere, rate limits, revocation."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator

import pytest
from argon2 import PasswordHasher

from blackdrez.server import identity
from blackdrez.server.records.accounts import (
    AccountError,
    AccountErrorCode,
    Accounts,
    LoginLimiter,
    name_key,
)
from blackdrez.server.records.store import GENERATIONS_AT_ONCE, RecordsStore
from tests.records.games import finished

SECRET = b"test secret"
PASSWORD = "correct horse battery"
FAST = PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
"""Cheap Argon2 parameters: the tests check behaviour, not the hash's cost."""


class Clock:
    """A settable clock, so rate limits and expiry are tested without waiting."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def accounts(store: RecordsStore, clock: Clock) -> AsyncIterator[Accounts]:
    yield Accounts(store, SECRET, hasher=FAST, clock=clock)


def guest(player: str = "p_guest", name: str = "Ann", now: float = 1_700_000_000.0) -> str:
    return identity.issue_token(SECRET, player, name, now).text


async def expect(code: AccountErrorCode, call) -> AccountError:  # type: ignore[no-untyped-def]
    with pytest.raises(AccountError) as caught:
        await call
    assert caught.value.code is code, caught.value.message
    return caught.value


async def test_a_claimed_identity_logs_in_on_another_browser(
    accounts: Accounts, store: RecordsStore
) -> None:
    await store.put_game(finished("g1", "blue_jacket", players=["p_guest"]))
    claimed = await accounts.claim(guest(), "Ann", PASSWORD)
    assert (claimed.player, claimed.name) == ("p_guest", "Ann")
    elsewhere = await accounts.login("ann", PASSWORD, "10.0.0.2")  # any letter case
    assert (elsewhere.player, elsewhere.name) == ("p_guest", "Ann")
    claims = await accounts.authenticate(elsewhere.token)
    assert claims is not None and (claims.player, claims.generation) == ("p_guest", 1)
    assert await accounts.authenticate(claimed.token) is not None
    player = await store.player("p_guest")
    assert player is not None and player.account and player.name == "Ann"
    games, _ = await store.games(player=elsewhere.player)
    assert [game.id for game in games] == ["g1"]  # the history comes with the identity


async def test_a_guest_who_never_finished_a_game_can_claim(accounts: Accounts) -> None:
    await accounts.claim(guest("p_new", "Bea"), "Bea", PASSWORD)
    assert (await accounts.login("Bea", PASSWORD, "ip")).player == "p_new"


async def test_after_the_claim_the_guest_token_is_refused(accounts: Accounts) -> None:
    token = guest()
    assert await accounts.authenticate(token) is not None
    await accounts.claim(token, "Ann", PASSWORD)
    assert await accounts.authenticate(token) is None


async def test_a_claim_can_choose_a_new_name(accounts: Accounts, store: RecordsStore) -> None:
    session = await accounts.claim(guest(name="Guest-0042"), "  Ann   Lee ", PASSWORD)
    assert session.name == "Ann Lee"
    assert (await accounts.login("ANN LEE", PASSWORD, "ip")).player == "p_guest"


async def test_claims_that_cannot_be_granted_change_nothing(
    accounts: Accounts, store: RecordsStore
) -> None:
    await accounts.claim(guest("p_one"), "Ann", PASSWORD)
    await expect(AccountErrorCode.NAME_TAKEN, accounts.claim(guest("p_two"), "ANN", PASSWORD))
    await expect(AccountErrorCode.INVALID_TOKEN, accounts.claim(guest("p_one"), "Cy", PASSWORD))
    await expect(AccountErrorCode.WEAK_PASSWORD, accounts.claim(guest("p_two"), "Bo", "short"))
    await expect(AccountErrorCode.WEAK_PASSWORD, accounts.claim(guest("p_two"), "Bo", "x" * 1025))
    for bad in ("", "   ", "a\x00b", "x" * 25, None):
        await expect(AccountErrorCode.BAD_NAME, accounts.claim(guest("p_two"), bad, PASSWORD))
    await expect(AccountErrorCode.INVALID_TOKEN, accounts.claim("forged.token", "Bo", PASSWORD))
    forged = identity.issue_token(b"another secret", "p_two", "Bo", 1_700_000_000.0).text
    await expect(AccountErrorCode.INVALID_TOKEN, accounts.claim(forged, "Bo", PASSWORD))
    assert await store.account_by_name(name_key("Bo")) is None
    assert await store.token_generation("p_two") is None
    # An account token cannot claim again either (the identity is already claimed).
    session = await accounts.login("Ann", PASSWORD, "ip")
    await expect(AccountErrorCode.ALREADY_CLAIMED, accounts.claim(session.token, "Cy", PASSWORD))


async def test_two_guests_racing_for_one_name_get_one_account(accounts: Accounts) -> None:
    outcomes = await asyncio.gather(
        *(accounts.claim(guest(f"p_{n}"), "Same", PASSWORD) for n in range(4)),
        return_exceptions=True,
    )
    won = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(won) == 1
    assert all(
        isinstance(o, AccountError) and o.code is AccountErrorCode.NAME_TAKEN
        for o in outcomes
        if o not in won
    )


async def test_a_wrong_password_or_unknown_name_is_one_answer(accounts: Accounts) -> None:
    await accounts.claim(guest(), "Ann", PASSWORD)
    wrong = await expect(AccountErrorCode.BAD_LOGIN, accounts.login("Ann", "wrong password", "a"))
    unknown = await expect(AccountErrorCode.BAD_LOGIN, accounts.login("Nobody", PASSWORD, "b"))
    assert wrong.message == unknown.message == "wrong name or password"


async def test_logins_are_limited_per_account(accounts: Accounts, clock: Clock) -> None:
    await accounts.claim(guest(), "Ann", PASSWORD)
    for attempt in range(5):
        await expect(AccountErrorCode.BAD_LOGIN, accounts.login("Ann", "guess", f"ip{attempt}"))
    limited = await expect(AccountErrorCode.RATE_LIMITED, accounts.login("Ann", PASSWORD, "new"))
    assert limited.retry_after == pytest.approx(60.0)
    await expect(AccountErrorCode.RATE_LIMITED, accounts.login("ANN", PASSWORD, "other"))
    clock.now += 61
    assert (await accounts.login("Ann", PASSWORD, "new")).player == "p_guest"


async def test_logins_are_limited_per_address(accounts: Accounts, clock: Clock) -> None:
    await accounts.claim(guest(), "Ann", PASSWORD)
    for number in range(20):
        await expect(AccountErrorCode.BAD_LOGIN, accounts.login(f"user{number}", "x", "1.2.3.4"))
    await expect(AccountErrorCode.RATE_LIMITED, accounts.login("Ann", PASSWORD, "1.2.3.4"))
    assert (await accounts.login("Ann", PASSWORD, "5.6.7.8")).player == "p_guest"
    clock.now += 7
    assert (await accounts.login("Ann", PASSWORD, "1.2.3.4")).player == "p_guest"


def test_the_limiter_forgets_refilled_keys_and_stays_bounded() -> None:
    limiter = LoginLimiter(max_keys=100)
    for number in range(1000):
        limiter.check(f"name{number}", f"ip{number}", 0.0)
    assert len(limiter.accounts) == len(limiter.clients) == 100
    limiter.check("late", "late", 10_000.0)  # every other bucket has refilled by now
    assert len(limiter.accounts) == len(limiter.clients) == 1


async def test_revoking_refuses_every_older_token(accounts: Accounts) -> None:
    first = await accounts.claim(guest(), "Ann", PASSWORD)
    second = await accounts.login("Ann", PASSWORD, "ip")
    fresh = await accounts.revoke(second.token)
    assert await accounts.authenticate(first.token) is None
    assert await accounts.authenticate(second.token) is None
    claims = await accounts.authenticate(fresh.token)
    assert claims is not None and claims.generation == 2 and fresh.player == "p_guest"
    await expect(AccountErrorCode.INVALID_TOKEN, accounts.revoke(first.token))
    again = await accounts.login("Ann", PASSWORD, "ip")
    assert await accounts.authenticate(again.token) is not None


async def test_token_generations_are_read_for_many_players_at_once(store: RecordsStore) -> None:
    """A node whose bus was down reads the generation of every account connected to it: more
    players than one query takes, guests (no account) left out."""
    for n in range(3):
        await store.create_account(f"p_{n}", f"Ann{n}", f"ann{n}", "hash")
    await store.revoke_tokens("p_1")
    players = [f"p_guest{n}" for n in range(GENERATIONS_AT_ONCE)] + ["p_0", "p_1"]
    assert await store.token_generations([*players, "p_2"]) == {"p_0": 1, "p_1": 2, "p_2": 1}
    assert await store.token_generations([]) == {}


async def test_a_guest_token_cannot_revoke(accounts: Accounts) -> None:
    await expect(AccountErrorCode.INVALID_TOKEN, accounts.revoke(guest("p_other")))


async def test_an_expired_token_is_refused(accounts: Accounts, clock: Clock) -> None:
    session = await accounts.claim(guest(), "Ann", PASSWORD)
    clock.now += identity.TOKEN_LIFETIME + 1
    assert await accounts.authenticate(session.token) is None


async def test_a_hash_with_old_parameters_is_upgraded_at_login(
    store: RecordsStore, clock: Clock
) -> None:
    await Accounts(store, SECRET, hasher=FAST, clock=clock).claim(guest(), "Ann", PASSWORD)
    stronger = PasswordHasher(time_cost=2, memory_cost=128, parallelism=1)
    await Accounts(store, SECRET, hasher=stronger, clock=clock).login("Ann", PASSWORD, "ip")
    account = await store.account_by_name("ann")
    assert account is not None and not stronger.check_needs_rehash(account.password_hash)
    assert PASSWORD not in account.password_hash and account.password_hash.startswith("$argon2id$")


def test_a_guest_token_reads_as_before_and_an_account_token_carries_its_generation() -> None:
    token = identity.issue_token(SECRET, "p", "Ann", 5.0)
    payload = json.loads(base64.urlsafe_b64decode(token.text.split(".")[0] + "=="))
    assert payload == {"p": "p", "n": "Ann", "t": 5.0}
    assert identity.read_token(SECRET, token.text, 60.0, 6.0) == token
    assert token.generation == 0
    account = identity.issue_token(SECRET, "p", "Ann", 5.0, generation=3)
    read = identity.read_token(SECRET, account.text, 60.0, 6.0)
    assert read == account and read is not None and read.generation == 3
