"""The fair shuffle: published test vector, an independent re-implementation, no modulo bias."""

from __future__ import annotations

import collections
import hashlib
import hmac
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from blackdrez.games import shuffle
from blackdrez.games.cards import pokerdrez_deck, standard_deck

VECTOR_SEED = "blackdrez-test-vector"


def reference_shuffle(deck: list, seed: str, context: str) -> list:
    """A second, deliberately naive implementation written from the docstring alone."""
    stream = b""
    counter = 0
    position = 0

    def take4() -> int:
        nonlocal stream, counter, position
        while position + 4 > len(stream):
            message = context.encode() + counter.to_bytes(8, "big")
            stream += hmac.new(seed.encode(), message, hashlib.sha256).digest()
            counter += 1
        x = int.from_bytes(stream[position : position + 4], "big")
        position += 4
        return x

    cards = list(deck)
    for i in range(len(cards) - 1, 0, -1):
        n = i + 1
        while True:
            x = take4()
            if x < 2**32 - (2**32 % n):
                break
        j = x % n
        cards[i], cards[j] = cards[j], cards[i]
    return cards


def test_published_vector_for_a_pokerdrez_deck() -> None:
    # docs/fairness.md publishes these; another language's implementation must reproduce them.
    assert shuffle.commitment(VECTOR_SEED) == (
        "9edbda05037cc8f53cc47dec451782a7f3b8681ba32b3cb6636b87ff9a76d186"
    )
    first_ten = shuffle.shuffled(pokerdrez_deck(), VECTOR_SEED)[:10]
    assert first_ten == ["J7", "J8", "Q9", "N2", "N1", "Q4", "P7", "R8", "Q3", "B8"]


def test_published_vector_for_a_blackjack_piles_round() -> None:
    first_ten = shuffle.shuffled(standard_deck(), VECTOR_SEED, "round:1")[:10]
    assert first_ten == ["QD", "TH", "3H", "8C", "3D", "JH", "5S", "6S", "TD", "2C"]


@settings(max_examples=200)
@given(seed=st.text(max_size=40), context=st.sampled_from(["deck", "round:1", "round:7", ""]))
def test_matches_an_independent_implementation(seed: str, context: str) -> None:
    deck = pokerdrez_deck(2)
    assert shuffle.shuffled(deck, seed, context) == reference_shuffle(deck, seed, context)


@given(seed=st.text(max_size=20))
def test_is_a_permutation(seed: str) -> None:
    deck = standard_deck(2)
    assert collections.Counter(shuffle.shuffled(deck, seed)) == collections.Counter(deck)


def test_contexts_give_independent_decks() -> None:
    deck = standard_deck()
    orders = {tuple(shuffle.shuffled(deck, "s", f"round:{r}")) for r in range(1, 8)}
    assert len(orders) == 7


def test_rejection_sampling_discards_the_biased_tail() -> None:
    n = 3
    limit = 2**32 - (2**32 % n)
    words = iter([limit, limit + 1, 7])  # the first two would favour 0 and 1: both rejected
    assert shuffle._randbelow(words, n) == 7 % n


@given(st.lists(st.integers(0, 2**32 - 1), min_size=8, max_size=8), st.integers(2, 12))
def test_the_inline_draws_reject_as_randbelow_does(first_block: list[int], size: int) -> None:
    """The shuffle draws inline (a deal is part of an action); over a stream whose first block
    holds words in the biased tails (a real stream almost never does), it shuffles as drawing
    with ``_randbelow`` does."""
    tails = [2**32 - 1 - (2**32 % n) + 1 + k for n in range(3, 13) for k in range(2)]
    words = [w for w in first_block + tails if w < 2**32] + list(range(1000, 1200))

    def block(counter: int) -> list[int]:
        return words[8 * counter : 8 * counter + 8]

    stream = iter(words)
    expected = list(range(size))
    for i in range(size - 1, 0, -1):
        j = shuffle._randbelow(stream, i + 1)
        expected[i], expected[j] = expected[j], expected[i]
    assert shuffle._fisher_yates(list(range(size)), block) == expected


def test_all_permutations_are_about_equally_likely() -> None:
    counts = collections.Counter(tuple(shuffle.shuffled("abc", f"seed-{i}")) for i in range(6000))
    assert set(counts) == set(itertools.permutations("abc"))
    # 1000 expected each; 6 sigma is about 6 * sqrt(1000 * 5/6) = 173.
    assert all(abs(c - 1000) < 173 for c in counts.values()), counts


def test_verify_deal_accepts_the_true_deal_and_names_a_false_card() -> None:
    seed = shuffle.new_seed()
    deck = pokerdrez_deck()
    order = shuffle.shuffled(deck, seed)
    published = shuffle.commitment(seed)
    assert shuffle.verify_deal(seed, published, deck, order[:20]) is None
    forged = [*order[:4], "Q1" if order[4] != "Q1" else "Q2", *order[5:20]]
    assert "card 5" in shuffle.verify_deal(seed, published, deck, forged)
    assert "commitment" in shuffle.verify_deal(seed + "x", published, deck, order[:20])


def test_seeds_in_play_are_fresh() -> None:
    assert len({shuffle.new_seed() for _ in range(100)}) == 100
    assert len(shuffle.new_seed()) == 64
