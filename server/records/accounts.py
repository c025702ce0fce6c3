"""Accounts: a guest claims their identity with a password, and logs in elsewhere to get it back.

Theory of operation
-------------------
A guest already has a player id and a name, carried by a signed token
(``blackdrez.server.identity``).
:meth:`Accounts.claim` takes that token, a name and a password, and stores an account for the
same player id, so history and rating stay attached to it; the name becomes theirs alone
(compared case-folded). :meth:`Accounts.login` on another browser checks the password and hands
out a token for that same player id.

Passwords are hashed with Argon2id (``argon2-cffi``, its default parameters: 64 MiB, 3 passes)
in a worker thread, at most :data:`HASHING_AT_ONCE` at a time, so that a burst of logins can
neither block the event loop nor exhaust memory. A login for a name with no account still
verifies against a dummy hash, so the answer takes as long as for a wrong password and does not
tell which names exist.

Logins are rate-limited in this process by :class:`LoginLimiter`: one token bucket per account
name and one per client address; an attempt spends a token from both, whatever its outcome.

Revocation: an account's tokens carry its *token generation* (``g`` in the token, 1 at the
claim). :meth:`Accounts.revoke` raises the generation, which makes every token issued before
refused by :meth:`Accounts.authenticate`, and hands the caller a fresh one. A guest token
(generation 0) is valid only while its player id has no account.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable

import msgspec
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from blackdrez.server import identity
from blackdrez.server.ratelimit import KeyedBuckets
from blackdrez.server.records.store import AlreadyClaimed, NameTaken, RecordsStore

MIN_PASSWORD = 8
MAX_PASSWORD = 1024
HASHING_AT_ONCE = 2
"""Argon2 computations running at once (each takes 64 MiB and most of a core)."""


class AccountErrorCode(enum.StrEnum):
    """Why an account request was refused. The values are stable: they go on the wire."""

    INVALID_TOKEN = "invalid_token"
    BAD_NAME = "bad_name"
    WEAK_PASSWORD = "weak_password"
    NAME_TAKEN = "name_taken"
    ALREADY_CLAIMED = "already_claimed"
    BAD_LOGIN = "bad_login"
    RATE_LIMITED = "rate_limited"


class AccountError(Exception):
    """A refused account request; nothing was changed. ``retry_after`` (seconds) when limited."""

    def __init__(
        self, code: AccountErrorCode, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after


class Session(msgspec.Struct, frozen=True, kw_only=True):
    """A logged-in identity: the token to present at ``hello`` from now on."""

    player: str
    name: str
    token: str


class LoginLimiter:
    """Login attempts allowed per account name and per client address (see the module doc).

    Defaults: 5 attempts at once per account, then one a minute; 20 per address, then one
    every 6 seconds. At most ``max_keys`` of each are remembered (the least recently used go).
    """

    def __init__(
        self,
        *,
        account_rate: float = 1 / 60,
        account_burst: int = 5,
        client_rate: float = 1 / 6,
        client_burst: int = 20,
        max_keys: int = 100_000,
    ) -> None:
        self.accounts = KeyedBuckets(account_rate, account_burst, max_keys)
        self.clients = KeyedBuckets(client_rate, client_burst, max_keys)

    def check(self, account: str, client: str, now: float) -> None:
        """Spend an attempt of ``account`` and of ``client``; raise ``AccountError`` if spent."""
        client_ok = self.clients.take(client, now)
        account_ok = self.accounts.take(account, now)
        if not client_ok:
            raise AccountError(
                AccountErrorCode.RATE_LIMITED,
                "too many login attempts from this address: wait and try again",
                1 / self.clients.rate,
            )
        if not account_ok:
            raise AccountError(
                AccountErrorCode.RATE_LIMITED,
                "too many login attempts for this account: wait and try again",
                1 / self.accounts.rate,
            )


def name_key(name: str) -> str:
    """The form names are compared in: cleaned and case-folded."""
    return identity.clean_name(name).casefold()


class Accounts:
    """Claim, log in, revoke, and check tokens against revocation (see the module docstring)."""

    def __init__(
        self,
        store: RecordsStore,
        secret: bytes,
        *,
        hasher: PasswordHasher | None = None,
        limiter: LoginLimiter | None = None,
        token_lifetime: float = identity.TOKEN_LIFETIME,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.secret = secret
        self.token_lifetime = token_lifetime
        self.hasher = hasher or PasswordHasher()
        self.limiter = limiter or LoginLimiter()
        self.clock = clock
        self._hashing = asyncio.Semaphore(HASHING_AT_ONCE)
        self._dummy_hash: str | None = None

    async def authenticate(self, token: str) -> identity.Token | None:
        """The token if it is genuine, unexpired and not revoked by its account, else ``None``.

        (The store's list of single revoked tokens, ``blackdrez.server.identity``, is checked
        apart.)
        """
        claims = identity.read_token(self.secret, token, self.token_lifetime, self.clock())
        if claims is None:
            return None
        generation = await self.store.token_generation(claims.player)
        return claims if claims.generation == (generation or 0) else None

    async def claim(self, token: str, name: str, password: str) -> Session:
        """Protect the token's identity with a password under ``name``; return a new session.

        Raises ``AccountError``: ``invalid_token``, ``bad_name``, ``weak_password``,
        ``name_taken`` or ``already_claimed``.
        """
        claims = await self.authenticate(token)
        if claims is None:
            raise AccountError(AccountErrorCode.INVALID_TOKEN, "the token is invalid or expired")
        if claims.generation:
            raise AccountError(AccountErrorCode.ALREADY_CLAIMED, "this identity is claimed")
        clean = identity.clean_name(name) if isinstance(name, str) else ""
        if clean != " ".join(str(name).split()):
            raise AccountError(
                AccountErrorCode.BAD_NAME,
                f"a name is 1 to {identity.MAX_NAME} printable characters, not {name!r}",
            )
        _check_password(password)
        password_hash = await self._hash(password)
        try:
            account = await self.store.create_account(
                claims.player, clean, name_key(clean), password_hash
            )
        except NameTaken:
            raise AccountError(
                AccountErrorCode.NAME_TAKEN, f"the name {clean!r} is already claimed"
            ) from None
        except AlreadyClaimed:
            raise AccountError(
                AccountErrorCode.ALREADY_CLAIMED, "this identity is already claimed"
            ) from None
        return self._session(account.player, account.name, account.token_generation)

    async def login(self, name: str, password: str, client: str) -> Session:
        """Log in as the account claimed under ``name``, from ``client`` (its address).

        Raises ``AccountError``: ``rate_limited`` (with ``retry_after``) or ``bad_login``.
        """
        if not isinstance(name, str) or not isinstance(password, str):
            raise AccountError(AccountErrorCode.BAD_LOGIN, "a name and a password are needed")
        key = name_key(name)
        self.limiter.check(key, client, self.clock())
        account = await self.store.account_by_name(key)
        stored = account.password_hash if account is not None else await self._dummy()
        valid = len(password) <= MAX_PASSWORD and await self._verify(stored, password)
        if account is None or not valid:
            raise AccountError(AccountErrorCode.BAD_LOGIN, "wrong name or password")
        if self.hasher.check_needs_rehash(account.password_hash):
            await self.store.set_password_hash(account.player, await self._hash(password))
        return self._session(account.player, account.name, account.token_generation)

    async def revoke(self, token: str) -> Session:
        """Refuse every token of the account from now on; return a fresh one for the caller.

        Raises ``AccountError`` ``invalid_token`` for an invalid token or a guest's.
        """
        claims = await self.authenticate(token)
        if claims is None or not claims.generation:
            raise AccountError(
                AccountErrorCode.INVALID_TOKEN, "only a valid account token can revoke tokens"
            )
        generation = await self.store.revoke_tokens(claims.player)
        if generation is None:  # the account is gone: nothing to log in to
            raise AccountError(AccountErrorCode.INVALID_TOKEN, "this account does not exist")
        return self._session(claims.player, claims.name, generation)

    def _session(self, player: str, name: str, generation: int) -> Session:
        token = identity.issue_token(self.secret, player, name, self.clock(), generation)
        return Session(player=player, name=name, token=token.text)

    async def _hash(self, password: str) -> str:
        async with self._hashing:
            return await asyncio.to_thread(self.hasher.hash, password)

    async def _verify(self, password_hash: str, password: str) -> bool:
        async with self._hashing:
            try:
                return await asyncio.to_thread(self.hasher.verify, password_hash, password)
            except (VerificationError, InvalidHashError):
                return False

    async def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = await self._hash("no account has this password")
        return self._dummy_hash


def _check_password(password: str) -> None:
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise AccountError(
            AccountErrorCode.WEAK_PASSWORD,
            f"a password is {MIN_PASSWORD} to {MAX_PASSWORD} characters",
        )
