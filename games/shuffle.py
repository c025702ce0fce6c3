"""Provably fair shuffling: commit to a seed before the deal, reveal it after the game.

Theory of operation
-------------------
A game's randomness comes from one secret *seed* (any text; in play 64 hex digits from
:mod:`secrets`). Before the first card is dealt the server publishes the *commitment*
``SHA-256(seed)`` (hex). When the game ends it reveals the seed, and anyone can re-run the shuffle
below, in any language, and check that the cards were dealt in exactly that order.

The algorithm (version ``hmac-sha256-fy-1``):

1. **Byte stream.** Block ``i`` (``i`` = 0, 1, 2, ...) is
   ``HMAC-SHA256(key = UTF-8(seed), message = UTF-8(context) || uint64_be(i))``; the stream is the
   blocks concatenated. ``context`` names the deck being shuffled (``"deck"`` for BlackDrez and Blue
   Jacket, ``"round:N"`` for round N of Blackjack Piles), so one seed yields independent decks.
2. **Uniform integers.** ``randbelow(n)`` reads the next 4 bytes of the stream as a big-endian
   unsigned 32-bit ``x``. With ``limit = 2**32 - (2**32 % n)``, if ``x >= limit`` the draw is
   rejected and another 4 bytes are read; otherwise the result is ``x % n``. Rejection removes the
   modulo bias exactly.
3. **Fisher-Yates.** Start from the deck in its canonical order (documented beside each game) and,
   for ``i`` from ``len(deck) - 1`` down to ``1``, swap ``deck[i]`` with ``deck[randbelow(i + 1)]``.
   The result's first card is the top of the stock: it is dealt first.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

ALGORITHM = "hmac-sha256-fy-1"
DEFAULT_CONTEXT = "deck"

T = TypeVar("T")


def new_seed() -> str:
    """Return a fresh secret seed for a game in play: 64 hex digits from the OS's CSPRNG."""
    return secrets.token_hex(32)


def commitment(seed: str) -> str:
    """Return the published commitment to ``seed``: the hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()


def _blocks(seed: str, context: str) -> Iterator[bytes]:
    key = seed.encode("utf-8")
    prefix = context.encode("utf-8")
    counter = 0
    while True:
        yield hmac.digest(key, prefix + counter.to_bytes(8, "big"), "sha256")
        counter += 1


_EIGHT_WORDS = struct.Struct(">8I")


def _words(seed: str, context: str) -> Iterator[int]:
    """Yield the stream as big-endian unsigned 32-bit integers."""
    for block in _blocks(seed, context):
        yield from _EIGHT_WORDS.unpack(block)


def _randbelow(words: Iterator[int], n: int) -> int:
    limit = (1 << 32) - ((1 << 32) % n)
    while True:
        x = next(words)
        if x < limit:
            return x % n


def shuffled(deck: Sequence[T], seed: str, context: str = DEFAULT_CONTEXT) -> list[T]:
    """Return a new list: ``deck`` shuffled by the documented algorithm from ``seed``."""
    key, prefix = seed.encode("utf-8"), context.encode("utf-8")

    def block(counter: int) -> tuple[int, ...]:
        return _EIGHT_WORDS.unpack(hmac.digest(key, prefix + counter.to_bytes(8, "big"), "sha256"))

    return _fisher_yates(list(deck), block)


def _fisher_yates(cards: list[T], block: Callable[[int], Sequence[int]]) -> list[T]:
    """Shuffle ``cards`` in place with the words of the stream's blocks (``block(i)``: block
    ``i``'s words), as :func:`_randbelow` draws them, and return them. The draws are inline, a
    block's words at a time: a game's deal is one of a node's actions (52 draws)."""
    words: list[int] = []
    at = counter = 0
    for i in range(len(cards) - 1, 0, -1):
        n = i + 1
        limit = (1 << 32) - ((1 << 32) % n)
        while True:
            if at == len(words):
                words += block(counter)
                counter += 1
            x = words[at]
            at += 1
            if x < limit:
                break
        j = x % n
        cards[i], cards[j] = cards[j], cards[i]
    return cards


def verify_deal(
    seed: str,
    published_commitment: str,
    deck: Sequence[T],
    dealt: Sequence[T],
    context: str = DEFAULT_CONTEXT,
) -> str | None:
    """Check that ``dealt`` is how the shuffle of ``deck`` by ``seed`` begins.

    Returns ``None`` when the seed matches the commitment and every dealt card is the one the
    shuffle puts there, or a sentence saying what does not match.
    """
    if not hmac.compare_digest(commitment(seed), published_commitment.lower()):
        return "the seed does not match the published commitment"
    order = shuffled(deck, seed, context)
    if len(dealt) > len(order):
        return f"{len(dealt)} cards dealt from a deck of {len(order)}"
    for position, (expected, actual) in enumerate(zip(order, dealt, strict=False)):
        if expected != actual:
            return f"card {position + 1} dealt was {actual!r}, the shuffle gives {expected!r}"
    return None
