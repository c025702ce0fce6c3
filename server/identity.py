"""Guest identity: display names and HMAC-signed session tokens.

A token is ``base64url(payload) "." base64url(HMAC-SHA256(secret, payload)[:18])`` where the payload
is the JSON ``{"p": player id, "n": display name, "t": issue time}``. Any node that shares the
secret (the store hands every node the same one) can check it without a database look-up.

A token is issued once, to a new guest, and never renewed: coming back with it gives the same token
again, so its lifetime counts from that first issue and a stolen token cannot be kept alive. Its
:attr:`Token.id` (the signature part) names it in the store's list of revoked tokens.

A player who claimed an account (``blackdrez.server.records.accounts``) gets tokens that also carry
``"g"``, the account's token generation: revoking the account's tokens ("log out everywhere")
raises the generation, so the server checks ``g`` against the account (one look-up) to refuse
every older token at once. A guest token has no ``g`` (generation 0) and reads exactly as before.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
import unicodedata
from dataclasses import dataclass

import msgspec

MAX_NAME = 24
TOKEN_LIFETIME = 30 * 24 * 3600.0


class _Payload(msgspec.Struct, omit_defaults=True):
    p: str
    n: str
    t: float
    g: int = 0


@dataclass(frozen=True, slots=True)
class Token:
    """A signed session token and what it says."""

    text: str
    """The token as the client holds it."""
    player: str
    name: str
    issued: float
    """Unix time of its (first and only) issue."""
    generation: int = 0
    """An account's token generation when the token was issued (0: a guest's token)."""

    @property
    def id(self) -> str:
        """A short name unique to this token: its signature, for the revocation list."""
        return self.text.rpartition(".")[2]

    def expires(self, lifetime: float) -> float:
        """The Unix time at which this token stops being accepted."""
        return self.issued + lifetime


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_player_id() -> str:
    """Return a fresh, unguessable player id."""
    return "p_" + secrets.token_urlsafe(12)


def clean_name(name: str | None) -> str:
    """Return a display name safe to show: printable, trimmed, at most 24 characters."""
    text = "".join(
        ch for ch in (name or "") if unicodedata.category(ch)[0] not in "CZ" or ch == " "
    )
    text = " ".join(text.split())[:MAX_NAME]
    return text or f"Guest-{secrets.randbelow(10_000):04d}"


def issue_token(
    secret: bytes, player: str, name: str, now: float | None = None, generation: int = 0
) -> Token:
    """Return a new signed token naming ``player`` and ``name``, issued ``now`` (an account's
    token: with the account's ``generation``)."""
    issued = time.time() if now is None else now
    payload = msgspec.json.encode(_Payload(player, name, issued, generation))
    signature = hmac.new(secret, payload, hashlib.sha256).digest()[:18]
    return Token(f"{_b64(payload)}.{_b64(signature)}", player, name, issued, generation)


def read_token(
    secret: bytes, token: str, lifetime: float, now: float | None = None
) -> Token | None:
    """Return the token if it is genuine and less than ``lifetime`` seconds old, else ``None``."""
    try:
        encoded_payload, encoded_signature = token.split(".")
        payload = _unb64(encoded_payload)
        signature = _unb64(encoded_signature)
    except ValueError:
        return None
    expected = hmac.new(secret, payload, hashlib.sha256).digest()[:18]
    if not hmac.compare_digest(signature, expected):
        return None
    try:
        data = msgspec.json.decode(payload, type=_Payload)
    except msgspec.DecodeError:
        return None
    if (time.time() if now is None else now) - data.t > lifetime:
        return None
    return Token(token, data.p, data.n, data.t, data.g)
