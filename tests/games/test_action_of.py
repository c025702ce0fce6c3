"""``GameSpec.action_of``: the fast path from an action's wire form to the game's action is
exactly ``msgspec.convert`` to the game's action union, in what it returns and in how it fails."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blackdrez.games import GAMES

SCALARS = st.none() | st.booleans() | st.integers(-5, 60) | st.text(max_size=6)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)


def _tags(game: str) -> list[str]:
    return [member.__struct_config__.tag for member in GAMES[game].action.__args__]


def _fields(game: str) -> list[str]:
    return sorted(
        {field for member in GAMES[game].action.__args__ for field in member.__struct_fields__}
    )


def wire_actions(game: str) -> st.SearchStrategy[Any]:
    """Action-like dicts of ``game`` (a known or unknown ``type``, its fields or others, right
    or wrong types) and any other JSON-like value."""
    known = st.sampled_from(_tags(game)) | st.text(max_size=8)
    fields = st.sampled_from(_fields(game)) | st.text(max_size=6)
    return VALUES | st.builds(
        lambda tag, extra: {"type": tag, **extra},
        known,
        st.dictionaries(fields, VALUES | st.lists(st.integers(0, 9), max_size=3), max_size=3),
    )


def outcome(convert: Any, wire: Any) -> tuple[str, Any]:
    try:
        return "value", convert(wire)
    except msgspec.ValidationError as error:
        return "error", str(error)


@pytest.mark.parametrize("game", sorted(GAMES))
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_action_of_is_msgspec_convert_to_the_action_union(game: str, data: st.DataObject) -> None:
    spec = GAMES[game]
    wire = data.draw(wire_actions(game))
    assert outcome(spec.action_of, wire) == outcome(lambda w: msgspec.convert(w, spec.action), wire)


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ({"type": "fly"}, "Invalid value 'fly' - at `$.type`"),
        ({"pile": 1}, "Object missing required field `type`"),
        (5, "Expected `object`, got `int`"),
        ({"type": "place", "pile": "x"}, "Expected `int`, got `str` - at `$.pile`"),
    ],
)
def test_a_bad_action_is_refused_with_msgspecs_own_words(wire: Any, message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as refused:
        GAMES["blackjack_piles"].action_of(wire)
    assert str(refused.value) == message
