"""Guest identity: display names and HMAC-signed session tokens.

A token is ``base64url(payload) "." base64url(HMAC-SHA256(secret, payload)[:18])`` where the payload
is the JSON ``{"p": player id, "n": display name, "t": issue time}``. Any node that shares the
secret (the store hands every node the same one) can check it without a database look-up.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
import unicodedata

import msgspec

MAX_NAME = 24
TOKEN_LIFETIME = 30 * 24 * 3600.0


class _Payload(msgspec.Struct):
    p: str
    n: str
    t: float


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


def issue_token(secret: bytes, player: str, name: str, now: float | None = None) -> str:
    """Return a signed token naming ``player`` and ``name``."""
    payload = msgspec.json.encode(_Payload(player, name, time.time() if now is None else now))
    signature = hmac.new(secret, payload, hashlib.sha256).digest()[:18]
    return f"{_b64(payload)}.{_b64(signature)}"


def read_token(secret: bytes, token: str, now: float | None = None) -> tuple[str, str] | None:
    """Return ``(player, name)`` from a valid, unexpired token, else ``None``."""
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
    if (time.time() if now is None else now) - data.t > TOKEN_LIFETIME:
        return None
    return data.p, data.n
