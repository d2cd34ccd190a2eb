"""The one rule for values every store takes (runner.core.storable): text made well-formed as ECMAScript's
``String.prototype.toWellFormed`` makes it, checked against the standard's algorithm written out here; integers past
4,300 digits kept as their digits' text; any mix of them in a record written and read back."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.core.record import TaskRecord
from runner.core.storable import INT_DIGITS, storable, too_large, well_formed


def to_well_formed(text: str) -> str:
    """ECMA-262 (2024) 22.1.3.32 ``String.prototype.toWellFormed``, on a Python string's code points read as UTF-16
    code units: a high surrogate (U+D800-DBFF) followed by a low one (U+DC00-DFFF) is the code point they encode;
    every other surrogate is U+FFFD."""
    out, index = [], 0
    while index < len(text):
        unit = ord(text[index])
        follower = ord(text[index + 1]) if index + 1 < len(text) else None
        if 0xD800 <= unit <= 0xDBFF and follower is not None and 0xDC00 <= follower <= 0xDFFF:
            out.append(chr(0x10000 + ((unit - 0xD800) << 10) + (follower - 0xDC00)))
            index += 2
            continue
        out.append("\ufffd" if 0xD800 <= unit <= 0xDFFF else text[index])
        index += 1
    return "".join(out)


# Mostly surrogates, so that pairs, lone halves and their neighbours all occur; and characters of 1 to 4 UTF-8 bytes.
TEXT = st.text(st.one_of(st.characters(categories=["Cs"]), st.sampled_from("a\u00e9\u20ac\U0001d7ce")))


@given(TEXT)
def test_text_is_made_well_formed_as_ecmascript_does(text):
    fixed = well_formed(text)
    assert fixed == to_well_formed(text)
    fixed.encode("utf-8")
    if not any(0xD800 <= ord(char) <= 0xDFFF for char in text):
        assert fixed is text


def test_the_issues_reply_and_a_pair_cut_in_two():
    assert well_formed(json.loads('"\\ud835" ') + "7") == "\ufffd7"
    assert well_formed("\ud835" + "\udfce") == "\U0001d7ce"
    assert well_formed("\udfce\ud835") == "\ufffd\ufffd"


def big(name: str) -> int:
    """400 nines, -1e400, or an integer of 4,301 digits (made when drawn: hypothesis prints its strategies)."""
    return {"400 nines": int("9" * 400), "-1e400": -(10**400), "4301 digits": 7 * 10**INT_DIGITS}[name]


JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | TEXT
    | st.integers() | st.sampled_from(["400 nines", "-1e400", "4301 digits"]).map(big),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@given(JSON)
def test_any_json_value_a_solution_returns_is_written_and_read_back_as_storable_makes_it(value):
    record = TaskRecord(run_id="r", task_id="t", repeat=0, status="ok", started_at="a", finished_at="b", output=value)
    assert TaskRecord.model_validate_json(record.model_dump_json().encode()).output == storable(value)


def test_integers_past_the_digits_json_readers_take_are_their_digits_text_and_too_large():
    assert storable([10**INT_DIGITS - 1]) == [10**INT_DIGITS - 1]
    assert storable({"n": -(10**INT_DIGITS)}) == {"n": "-1" + "0" * INT_DIGITS}
    assert [too_large(v) for v in (int("9" * 308), int("9" * 309), -(10**400), "1" * 4301, "1" * 400, True, 1.5)] \
        == [False, True, True, True, False, False, False]


def test_values_json_cannot_hold_at_all_are_refused_with_a_value_error():
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="contains itself"):
        storable({"a": cycle})
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValueError, match="nested too deeply"):
        storable(deep)
    shared = ["x"]
    assert storable([shared, shared]) == [["x"], ["x"]]  # the same list twice is no cycle
