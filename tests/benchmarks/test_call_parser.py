"""The call parser BFCL and ACEBench share (runner.benchmarks.call_parser): the same reading where the official
copies agree, each benchmark's own rule where they differ."""

from __future__ import annotations

import pytest

from runner.benchmarks.acebench.calls import CallSyntaxError, decode_calls
from runner.benchmarks.bfcl.decode import DecodeError, parse_python

SHARED = "[api.get(city=Paris, n=-3, flag=+True, tags=['a', ...], pair=(1, 2), table={'k': [1]}, item=x[0])]"


def test_both_read_the_shared_forms_alike():
    expected = [{"api.get": {"city": "Paris", "n": -3, "flag": -1, "tags": ["a", "..."], "pair": (1, 2),
                             "table": {"k": [1]}, "item": "x[0]"}}]
    assert parse_python(SHARED) == expected
    assert decode_calls(SHARED) == expected


def test_each_keeps_its_own_rules():
    # A call without keywords inside an argument: BFCL's copy gives its text, ACEBench's {name: {}}.
    assert parse_python("[f(a=g(1))]") == [{"f": {"a": "g(1)"}}]
    assert decode_calls("[f(a=g(1))]") == [{"f": {"a": {"g": {}}}}]
    # A lone call and wrapping quotes: BFCL's ast_parse takes them, ACEBench's wants a list.
    assert parse_python("'f(a=1)'") == [{"f": {"a": 1}}]
    with pytest.raises(CallSyntaxError, match="not a list of calls"):
        decode_calls("f(a=1)")
    # A binary operation on a name: BFCL refuses what it would eval, ACEBench reads the name as its text.
    with pytest.raises(DecodeError, match="not evaluated"):
        parse_python("[f(a=x+'b')]")
    assert decode_calls("[f(a=x+'b')]") == [{"f": {"a": "xb"}}]


@pytest.mark.parametrize("text", ["[f(a=1), 2]", "[f(a=-'s')]", "[f(a={**d})]", "[f(a={[1]: 2})]", "[f(a=lambda: 1)]",
                                  "[f(a=1"])
def test_both_refuse_with_their_own_error(text):
    with pytest.raises(DecodeError):
        parse_python(text)
    with pytest.raises(CallSyntaxError):
        decode_calls(text)
