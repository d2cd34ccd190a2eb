"""Per-item parity of :func:`runner.benchmarks.gaia.question_scorer` with the leaderboard's own ``question_scorer``
(vendored in ``official_scorer.py``): the same verdict on hand-picked edge cases of every branch and on thousands of
generated answer/truth pairs built from the characters the rules treat specially."""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.benchmarks.gaia import question_scorer
from runner.benchmarks.gaia.scorer import answer_type
from tests.benchmarks.gaia import official_scorer


def official(model_answer, ground_truth) -> bool:
    """The leaderboard's verdict, its prints and warnings silenced."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return official_scorer.question_scorer(model_answer, ground_truth)


# (model answer, ground truth, verdict): the verdict is the leaderboard's, checked against it below.
EDGE_CASES = [
    # numbers: $, % and , are dropped from the answer; the truth must parse with float as it is
    ("17", "17", True), ("17.0", "17", True), ("$17", "17", True), ("17%", "17", True), ("1,700", "1700", True),
    ("1 700", "1700", False), ("seventeen", "17", False), ("17 ", "17", True), (" 17", "17", True),
    ("17 apples", "17", False), ("0.1", ".1", True), ("1e3", "1000", True), ("1_000", "1000", True),
    ("inf", "inf", True), ("banana", "inf", True), ("nan", "nan", False), ("-0", "0", True), ("$1,2,3", "123", True),
    ("17", " 17 ", True), ("None", "17", False), (None, "17", False), ("", "0", False), ("3.14159", "3.14", False),
    # the truth is a list when it holds , or ;
    ("a, b", "a, b", True), ("A;B", "a, b", True), ("a,b,c", "a, b", False), ("1, 2", "1, 2", True),
    ("1.0; 2", "1, 2", True), ("$1, 2%", "1, 2", True), ("a.b, c", "a.b, c", True), ("ab, c", "a.b, c", False),
    ("a, b", "a,b", True), ("a, b ", "a, b", True), ("1,000", "1,000", True), ("1000", "1,000", False),
    ("St. Louis, Paris", "St. Louis, Paris", True), ("St Louis, Paris", "St. Louis, Paris", False),
    ("None", "a, b", False), (None, "None, x", False), ("", ",", False), (",", ",", True), (";", ",", True),
    ("x", "x;", False), ("x;", "x,", True),
    # strings: whitespace, punctuation and case do not count
    ("Sea Gull", "seagull", True), ("sea-gull!", "seagull", True), ("The Seagull", "seagull", False),
    ("None", "None", True), (None, "None", True), (None, "none.", True), ("", "", True), ("  ", "", True),
    ("naïve", "naive", False), ("É", "é", True), ("$5", "$5", True), ("5", "$5", True), ("5$", "$5", True),
    ("5%", "5 percent", False), ("ＡＢ", "ab", False),
]


@pytest.mark.parametrize(("answer", "truth", "verdict"), EDGE_CASES)
def test_edge_cases_get_the_leaderboards_verdict(answer, truth, verdict):
    assert official(answer, truth) is verdict, "the table's verdict is not the leaderboard's"
    assert question_scorer(answer, truth) is verdict


def test_the_truth_decides_the_branch_as_the_leaderboard_does():
    assert [answer_type(t) for t in ("17", " 1e3 ", "nan", "1_0", "1,000", "a;b", "$5", "17 apples", "")] == \
        ["number", "number", "number", "number", "list", "list", "string", "string", "string"]


def test_an_answer_that_is_not_text_fails_as_it_does_on_the_leaderboard():
    for truth in ("17", "a, b", "word"):
        with pytest.raises((AttributeError, TypeError)):
            official(17, truth)
        with pytest.raises(TypeError, match="model_answer must be a string or None"):
            question_scorer(17, truth)


# Characters the rules read specially, and some that they do not.
SPECIAL = list("0123456789.,;$%-+eE_ \t\n") + ["inf", "nan", "None", "St.", "a", "B", "é", "!", "'", "(", ")",
                                             "\u00a0", "\u2009", "١"]
texts = st.lists(st.sampled_from(SPECIAL), max_size=10).map("".join)
numbers = st.one_of(st.integers(-10**6, 10**6).map(str),
                    st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr),
                    st.decimals(places=3, allow_nan=False, allow_infinity=False).map(str))


def _variants(truth: str) -> st.SearchStrategy[str]:
    """Answers near ``truth``: itself, its case changed, spaces and units added, separators swapped."""
    return st.sampled_from([
        truth, truth.upper(), truth.lower(), f" {truth} ", f"${truth}", f"{truth}%", truth.replace(",", ";"),
        truth.replace(";", ","), truth.replace(" ", ""), truth.replace(",", ", "), truth + ",", truth.replace(".", ""),
    ])


pairs = st.one_of(
    st.tuples(texts, texts),
    st.tuples(numbers, numbers),
    st.tuples(texts, numbers),
    st.lists(st.one_of(numbers, texts), min_size=1, max_size=4).map(", ".join).flatmap(
        lambda truth: st.tuples(_variants(truth), st.just(truth))),
    numbers.flatmap(lambda truth: st.tuples(_variants(truth), st.just(truth))),
    texts.flatmap(lambda truth: st.tuples(_variants(truth), st.just(truth))),
    st.tuples(st.none(), st.one_of(texts, numbers, st.just("None"))),
)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs)
def test_generated_pairs_get_the_leaderboards_verdict(pair):
    answer, truth = pair
    assert question_scorer(answer, truth) is official(answer, truth)


def test_the_generated_pairs_reach_every_branch_and_both_verdicts():
    """The generator is not vacuous: it reaches the three branches, and each both right and wrong."""
    seen: set[tuple[str, bool]] = set()

    @settings(max_examples=1500, deadline=None, database=None)
    @given(pairs)
    def collect(pair):
        answer, truth = pair
        seen.add((answer_type(truth), official(answer, truth)))

    collect()
    assert seen == {(kind, verdict) for kind in ("number", "list", "string") for verdict in (True, False)}
