"""The official HotpotQA metrics against values computed by hand from hotpot_evaluate_v1.py's rules."""

import pytest

from runner.benchmarks.hotpotqa import official


@pytest.mark.parametrize(
    "text, normalized",
    [
        ("Arthur's Magazine!", "arthurs magazine"),   # punctuation deleted, lowercased
        ("The Beatles", "beatles"),                  # article removed
        ("an apple a day, the end", "apple day end"),
        ("Anna and Theo", "anna and theo"),          # articles only as whole words
        ("  New\tYork  ", "new york"),               # whitespace collapsed
        ("café—bar", "café—bar"),                    # only ASCII punctuation is deleted
    ],
)
def test_normalize_answer(text, normalized):
    assert official.normalize_answer(text) == normalized


def test_exact_match_after_normalisation():
    assert official.exact_match("The Beatles.", "beatles") == 1.0
    assert official.exact_match("Beatles band", "Beatles") == 0.0


def test_yes_no_noanswer_rule():
    assert official.answer_prf("yes", "no") == official.ZERO
    assert official.answer_prf("yes it is", "yes") == official.ZERO      # gold is special, prediction differs
    assert official.answer_prf("no", "no way") == official.ZERO          # prediction is special, gold differs
    assert official.answer_prf("Yes.", "yes") == official.PRF(1.0, 1.0, 1.0)


def test_partial_overlap_f1():
    prf = official.answer_prf("the city of New York", "New York City")
    # tokens: [city, of, new, york] vs [new, york, city]: 3 shared -> P 3/4, R 1, F1 6/7
    assert prf.precision == pytest.approx(0.75)
    assert prf.recall == pytest.approx(1.0)
    assert prf.f1 == pytest.approx(6 / 7)
    assert official.answer_prf("Paris", "London") == official.ZERO


def test_supporting_facts_are_sets_so_duplicates_collapse():
    em, prf = official.supporting_fact_scores([["A", 0], ["A", 0], ["B", 1]], [["A", 0], ["B", 0]])
    assert em == 0.0
    assert (prf.precision, prf.recall, prf.f1) == (0.5, 0.5, 0.5)
    em, prf = official.supporting_fact_scores([("A", 0), ("B", 0)], [["B", 0], ["A", 0]])
    assert (em, prf.f1) == (1.0, 1.0)
    assert official.supporting_fact_scores([], [["A", 0]]) == (0.0, official.ZERO)


def test_joint_scores_are_products():
    scores = official.score_record("the city of New York", [["A", 0], ["B", 1]], "New York City", [["A", 0], ["B", 0]])
    assert scores.joint_prec == pytest.approx(0.75 * 0.5)
    assert scores.joint_recall == pytest.approx(1.0 * 0.5)
    assert scores.joint_f1 == pytest.approx(2 * 0.375 * 0.5 / 0.875)
    assert scores.joint_em == 0.0
    perfect = official.score_record("x", [["A", 0]], "x", [["A", 0]])
    assert (perfect.joint_em, perfect.joint_f1) == (1.0, 1.0)


def test_a_missing_answer_or_missing_facts_scores_zero_on_what_is_missing_and_on_joint():
    no_answer = official.score_record(None, [["A", 0]], "x", [["A", 0]])
    assert (no_answer.em, no_answer.f1, no_answer.sp_em, no_answer.joint_f1) == (0.0, 0.0, 1.0, 0.0)
    no_facts = official.score_record("x", None, "x", [["A", 0]])
    assert (no_facts.em, no_facts.sp_f1, no_facts.joint_em) == (1.0, 0.0, 0.0)
