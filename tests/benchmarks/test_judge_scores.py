"""Reading a judge's score: every way a number is written gives that number or a clear error, on every path (JSON,
keyed, bare), and the verdict of a reply with several scores is its last keyed one.

Property tests (hypothesis) write a number in each supported form, embed it in replies of each path, and check that
the reader gives that number; others check that a sign is never dropped and that no text makes the reader fail
other than with :class:`JudgeError`."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from runner.benchmarks.judge_scores import MINUS_SIGNS, JudgeError, read_number, read_score


def _score(text: str | None) -> float:
    return read_score(text).value


# inspect_ai#4872's kind: the separator pattern swallowed the minus sign of a keyed score.
@pytest.mark.parametrize(("reply", "value"), [
    ("Score: -1", -1.0),                 # the input: was read as 1.0, full credit
    ("Rating = −0.5", -0.5),             # a neighbour: U+2212 after "=", no test names it
    ("**Score:** –1", -1.0),             # en dash as minus, markdown bold
    ("similarity: \u2012 0.5", None),    # a figure dash set apart: a sign or a separator? refused
    ('{"score": "−1"}', -1.0),           # JSON string with U+2212
    ('{"score": -1}', -1.0),
    ("score -1", -1.0),
    ("Score: [[-1]]", -1.0),
    ("Score - 1", None),
    ("- 1", None),
    ("Score: ±0.5", None),
])
def test_a_sign_is_never_dropped(reply, value):
    if value is None:
        with pytest.raises(JudgeError, match="set apart|no single value"):
            read_score(reply)
    else:
        assert _score(reply) == value


@pytest.mark.parametrize(("reply", "value"), [
    ("0,8", 0.8), ("Score: 0,75", 0.75), ("1,5", 1.5),
    ("5e-1", 0.5), ("5E−1", 0.5), ("Score: 5 × 10^-1", 0.5), ("5*10**-1", 0.5), ("2.5e+0", 2.5),
    ("80%", 0.8), ("80 %", 0.8), ("80 percent", 0.8), ("800‰", 0.8), ("８0％", 0.8),
    ("3/5", 0.6), ("4 out of 5", 0.8), ("Score: 3⁄5", 0.6), ("½", 0.5), ("Score: 1½", 1.5),
    ("+0.5", 0.5), ("Score: .8", 0.8), ("-0", 0.0),
])
def test_every_way_a_number_is_written_gives_that_number(reply, value):
    assert _score(reply) == pytest.approx(value)


@pytest.mark.parametrize(("reply", "why"), [
    ("Score: 1,000", "thousands separator"),
    ("1,000.5", "marks"), ("1.2.3", "marks"),
    ("Score: 0-1", "range"), ("0.7 to 0.9", "range"), ("Score: 0.6–0.8", "range"),
    ("Score: 1 × 2", "operator"), ("Score: 0.5^2", "operator"),
    ("Score: 1/0", "divides by zero"),
    ("1e999", "out of range|finite"), ('{"score": 1e999}', "finite"), ('{"score": NaN}', "finite"),
    ('{"score": true}', "not a number"), ('{"score": null}', "not a number"),
    ("nan", "no score"), ("5th", "no score"), ("COVID-19", "no score"),
])
def test_a_number_whose_value_cannot_be_told_is_refused_with_what_was_found(reply, why):
    with pytest.raises(JudgeError, match=why):
        read_score(reply)


# inspect_ai PR #3913's kind: the first of several scores won.
def test_the_verdict_is_the_last_keyed_score_and_the_others_are_kept():
    reading = read_score("Score: 1 means equivalent, 0 means different. The answer is wrong. Score: 0")
    assert (reading.value, reading.path) == (0.0, "keyed")
    assert reading.several == ["Score: 1", "Score: 0"]


@pytest.mark.parametrize(("reply", "value", "several"), [
    # a neighbour: MT-Bench's [[rating]] after a quoted rubric; MT-Bench itself takes the first [[...]]
    ("A perfect answer gets Rating: [[1]]. This one misses a fact. Rating: [[0.5]]", 0.5,
     ["Rating: [[1", "Rating: [[0.5"]),
    ("Score (0-1): 0.8", 0.8, []),                               # a scale before the colon is no score
    ("Score: 0.8. I am confident; final score: 0.8", 0.8, []),   # scores that agree are one
    ("**Score:** 1 would fit a full match; **Score:** 0-1 for partial ones. Final score: 0", 0.0,
     ["Score:** 1", "Score:** 0", "score: 0"]),
])
def test_several_keyed_scores(reply, value, several):
    reading = read_score(reply)
    assert reading.value == value and reading.several == several


def test_an_unreadable_last_keyed_score_is_refused_even_after_a_readable_one():
    with pytest.raises(JudgeError, match=r"the judge's score 'Score: 0' cannot be read \(a range starting at '0'\)"):
        read_score("Score: 0.5 at first sight. Score: 0-1")


# ---- property tests ----

_MINUS = st.sampled_from(MINUS_SIGNS)
_DIGITS = st.from_regex(r"\A(0|[1-9][0-9]{0,2})(\.[0-9]{1,4})?\Z")


@st.composite
def _written(draw) -> tuple[str, float]:
    """A number in one of the supported forms, and its value."""
    digits = draw(_DIGITS)
    value = float(digits)
    form = draw(st.sampled_from(["plain", "plus", "minus", "comma", "exponent", "times_ten", "percent", "fraction",
                                 "out_of"]))
    if form == "plus":
        return f"+{digits}", value
    if form == "minus":
        return f"{draw(_MINUS)}{digits}", -value
    if form == "comma":
        whole, _, decimals = digits.partition(".")
        if len(decimals) == 3 and whole != "0":  # "1,234" may be a thousands separator: refused, tested above
            return digits, value
        return (f"{whole},{decimals}" if decimals else whole), value
    if form == "exponent":
        power = draw(st.integers(-5, 5))
        return f"{digits}{draw(st.sampled_from('eE'))}{power}", float(f"{digits}e{power}")
    if form == "times_ten":
        power = draw(st.integers(-5, 5))
        return f"{digits} × 10^{power}", float(f"{digits}e{power}")
    if form == "percent":
        return f"{digits}{draw(st.sampled_from(['%', ' %', ' percent']))}", value / 100
    denominator = draw(st.integers(1, 100))
    if form == "fraction":
        return f"{digits}/{denominator}", value / denominator
    return f"{digits} out of {denominator}", value / denominator


_TEMPLATES = [
    "{}", " {}.\n", "Score: {}", "score={}", "**Rating:** {}", "Similarity: [[{}]]", "The score is {}.",
    '{{"score": "{}"}}', "<think>Maybe 0.2, or Score: 1.</think>\nScore: {}",
    "Score: 1 means equivalent, 0 means different. The answer is partly right. Score: {}",
    "```json\n{{\"rating\": \"{}\", \"reason\": \"two facts match\"}}\n```",
]


@given(_written(), st.sampled_from(_TEMPLATES))
@example(("-1", -1.0), "Score: {}")   # the input
def test_any_written_number_in_any_reply_gives_that_number(written, template):
    text, value = written
    assert _score(template.format(text)) == pytest.approx(value, rel=1e-12, abs=1e-15)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_json_number_or_pythons_own_repr_is_read_exactly(value):
    """JSON numbers, and every text ``float()`` reads back (BeeAI's parser) that is a plain number, read the same."""
    assert _score(json.dumps({"score": value})) == value
    assert _score(repr(value)) == value + 0.0
    assert read_number(repr(value)) == value + 0.0


_SEPARATORS = [":", ": ", " ", "=", " = ", " is ", ": **", ":** ", ": [[", '": ', '": "', " (0-1): ", "\t", ": ("]


@given(st.sampled_from(["Score", "rating", "SIMILARITY", "Grade"]), st.sampled_from(_SEPARATORS), _MINUS, _DIGITS,
       st.sampled_from(["", " ", "  "]))
def test_a_minus_after_any_key_and_separator_is_kept_or_refused_never_dropped(key, separator, minus, digits, gap):
    reply = f"The answer is wrong. {key}{separator}{minus}{gap}{digits}"
    try:
        value = _score(reply)
    except JudgeError:
        assert gap, "a minus touching its digits is a sign: read, not refused"
        return
    assert not gap and value == -float(digits) + 0.0


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80)
       | st.text(alphabet="0123456789.,-−–+/%eE×^ Score:[]{}\"' \n", max_size=40))
def test_any_text_gives_a_finite_number_or_a_judge_error(text):
    try:
        value = _score(text)
    except JudgeError as exc:
        assert str(exc) and "\n" not in str(exc)[:1]
        return
    assert math.isfinite(value)
