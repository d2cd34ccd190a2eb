"""Reading the score in an LLM judge's reply: every way a number is written gives that number or a clear error.

A judge asked for "a number between 0 and 1" answers ``0.8``, but also ``Score: 0.8``, ``**Rating:** 8/10``,
``{"score": "80%"}``, ``Score: −1`` (with U+2212), ``0,8`` or ``5e-1``, and often restates the rubric or reasons
about other scores before its verdict. :func:`read_score` reads the verdict by these rules (``docs/hotpotqa.md``,
"Reading the judge's reply", has the table):

1. A ``<think>...</think>`` block is removed first.
2. **JSON**: a reply that is one JSON object (alone or in a fenced block) with a ``score``, ``rating``,
   ``similarity`` or ``value`` key (the first of these present wins): a JSON number is taken as it is, a string is
   read as one number by the rules below (``"80%"``, ``"−1"``); a boolean, null or anything else is refused.
3. **Keyed**: every number right after the word score, rating, similarity or grade (any case; the separator may
   be spaces, ``:``, ``=``, ``*``, quotes, ``[[``, ``(``, the words "is", "of", "would be"..., and a scale in
   brackets before a colon, as in ``Score (0-1): 0.8``). **The verdict is the last keyed score.** A reply whose
   keyed scores disagree (``Score: 1 means equivalent, 0 means different. ... Score: 0``) is read as its last one,
   and :attr:`ScoreReading.several` lists them all, so that a report can count such replies.
4. **Bare**: otherwise, the only number in the reply; several numbers that all give one value count as one
   (``3/5 (60%)``); different ones are refused.

How a number is written (every path):

- a sign belongs to the number only when it touches its digits: ``-1``, ``+0.5`` and every other minus character
  (U+2212 minus sign, en and em dash, figure dash, hyphen, non-breaking hyphen, small and full-width hyphen-minus);
  ``±`` is refused; a dash set apart from the number after it (``Score - 1``, ``Score: – 1``, a bare ``- 1``) could
  be a sign or a separator, and is refused;
- a decimal point, or a decimal comma (``0,8`` is 0.8; ``1,5`` is 1.5); a comma before exactly three digits after a
  non-zero whole part (``1,000``) could be a thousands separator, and is refused, as is a number with more than one
  mark (``1,000.5``, ``1.2.3``);
- an exponent: ``5e-1``, ``5E−1``, ``5 × 10^-1``, ``5*10**-1``; any other ``×``, ``*`` or ``^`` after a number is
  refused;
- a percentage: ``80%``, ``80 %``, ``80 percent`` (0.8), ``800‰`` (0.8);
- a fraction: ``3/5``, ``4 out of 5``, ``3⁄5``, ``½``, ``1½``; a zero denominator is refused;
- a range (``0-1``, ``0.7 to 0.9``) is refused;
- a number glued to letters is no number (``5th``, ``COVID-19``, ``gpt4``); NaN and the infinities are refused.

"Refused" is :class:`JudgeError` (``judge_reply_unreadable``), naming what was found. Whether the value is in the
metric's range is the caller's check (:class:`runner.core.metric.JudgeScoreOutOfRange`).

How these compare with the official parsers (details in ``docs/hotpotqa.md``): BeeAI's metrics read the whole reply
with ``float(text)`` and score anything else 0.0 (beeai-framework ``python/examples/evaluation/deepeval/
answer_llm_judge_metric.py``, commit 28150efd); MT-Bench's single-answer grading takes the *first*
``[[rating]]`` (regex ``\\[\\[(\\d+\\.?\\d*)\\]\\]``, then ``\\[(\\d+\\.?\\d*)\\]``; FastChat ``fastchat/llm_judge/
common.py``, ``run_judge_single``, commit 007ecd07), which has no sign at all, so ``[[-1]]`` is no rating there.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass, field

from runner.core.metric import MetricError

MINUS_SIGNS = "-\u2212\u2013\u2014\u2012\u2010\u2011\ufe63\uff0d"
"""Characters read as a minus sign when they touch a number's digits: hyphen-minus, minus sign (U+2212), en dash,
em dash, figure dash, hyphen, non-breaking hyphen, small hyphen-minus, full-width hyphen-minus."""
PLUS_SIGNS = "+\uff0b"
SCORE_KEYS = ("score", "rating", "similarity", "grade")
"""The words that mark a number as the score (keyed reading)."""
JSON_KEYS = ("score", "rating", "similarity", "value")
"""The keys of a JSON reply that hold the score, in order of preference."""

_SIGN = f"[{re.escape(MINUS_SIGNS + PLUS_SIGNS)}±]"
_VULGAR = "½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅐⅛⅜⅝⅞⅑⅒↉"
# The digits of a number: with its marks (checked later), a leading-point decimal, a vulgar fraction.
_MANTISSA = rf"\d+(?:[.,]\d+)*[{_VULGAR}]?|\.\d+|[{_VULGAR}]"
_GLUED_BEFORE = r"(?<![0-9A-Za-z_.,])" + rf"(?<![0-9A-Za-z_]{_SIGN})"
_NUMBER = re.compile(
    _GLUED_BEFORE
    + rf"(?P<sign>{_SIGN})?(?P<mantissa>{_MANTISSA})"
    + rf"(?:[eE](?P<exponent>{_SIGN}?\d+)"
    + rf"|\s*(?:[×xX*·]\s*10\s*(?:\^|\*\*)\s*(?P<power>{_SIGN}?\d+)))?"
    + rf"(?:\s*(?:/|⁄|∕|\bout\s+of\b)\s*(?P<denominator>{_SIGN}?(?:\d+(?:[.,]\d+)*|\.\d+))"
    + r"|\s*(?P<percent>%|％|\bpercent\b|\bper\s+cent\b)|\s*(?P<permille>‰))?"
    + r"(?![0-9A-Za-z_])",
    re.IGNORECASE,
)
# What may follow a number and would change it if it were read: a range, another operator, a power.
_RANGE_AFTER = re.compile(rf"\s*(?:[{re.escape(MINUS_SIGNS)}]|\bto\b)\s*{_SIGN}?[\d.]", re.IGNORECASE)
_OPERATOR_AFTER = re.compile(r"\s*(?:[×·*^]|\*\*|[xX])\s*[\d.]")
_LOOSE_SIGN = re.compile(rf"(?:^|(?<=[\s:=*(\[{{\"'|>]))({_SIGN})\s+(?=[\d.])")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCED_JSON = re.compile(r"^```(?:json)?\s*(\{.*\})\s*```$", re.DOTALL | re.IGNORECASE)
_KEY = re.compile(r"(?<![A-Za-z])(?:" + "|".join(SCORE_KEYS) + r")(?![A-Za-z])", re.IGNORECASE)
# Between a key and its number: a scale in brackets before a colon, then separators and linking words.
_SCALE = re.compile(r"\s*(?:\([^()\n]{0,30}\)|\[[^\[\]\n]{0,30}\])(?=\s*[:=：])")
_SEPARATOR = re.compile(
    r"(?:[\s:=*\"'`_#|：\[(]|\b(?:is|was|of|would\s+be|will\s+be|should\s+be)\b){0,12}", re.IGNORECASE)
_DASH_APART = re.compile(rf"({_SIGN})\s+(?=[\d.])")


class JudgeError(MetricError):
    """A judge reply that holds no usable score (the message quotes the start of the reply and says what was found;
    a metric keeps the reply in its metadata)."""

    code = "judge_reply_unreadable"


@dataclass(frozen=True)
class ScoreReading:
    """The score read from a judge's reply.

    Attributes:
        value: the verdict, as written (not checked against a range).
        path: how it was read: ``json``, ``keyed`` or ``bare``.
        several: the keyed scores of the reply as written (``["Score: 1", "Score: 0"]``) when they disagree,
            in order (the last is the verdict); empty otherwise.
    """

    value: float
    path: str
    several: list[str] = field(default_factory=list)


class _Unreadable(ValueError):
    """A number-like token that gives no single number (the message says why)."""


def read_number(text: str) -> float:
    """The one number ``text`` holds, written in any of the forms of the module docstring (spaces around it allowed).

    Raises:
        JudgeError: no number, more than one, or one whose value cannot be told (a range, a thousands separator or
            decimal comma, a loose sign, NaN or an infinity).
    """
    stripped = text.strip()
    match = _NUMBER.match(stripped)
    if match is None or match.end() != len(stripped):
        raise JudgeError(f"{_quote(stripped)} is not one number")
    try:
        return _value(match, stripped)
    except _Unreadable as exc:
        raise JudgeError(f"{exc} in {_quote(stripped)}") from None


def read_score(text: str | None) -> ScoreReading:
    """The verdict in a judge's reply, by the rules of the module docstring.

    Raises:
        JudgeError: an empty reply, no number, a verdict whose value cannot be told (the message says what was
            found), or several different numbers with none marked as the score.
    """
    stripped = _THINK.sub("", text or "").strip()
    if not stripped:
        raise JudgeError("the judge's reply is empty")
    preview = _quote(stripped)
    from_json = _json_score(stripped, preview)
    if from_json is not None:
        return ScoreReading(from_json, "json")
    keyed = _keyed(stripped)
    if keyed:
        snippet, verdict = keyed[-1]
        if isinstance(verdict, _Unreadable):
            raise JudgeError(f"the judge's score {snippet!r} cannot be read ({verdict}) in the reply {preview}")
        values = {value if isinstance(value, float) else None for _, value in keyed}
        return ScoreReading(verdict, "keyed", [s for s, _ in keyed] if len(values) > 1 else [])
    loose = _LOOSE_SIGN.search(stripped)
    if loose is not None:
        raise JudgeError(f"a {loose.group(1)!r} set apart from the number after it (a sign or a dash?) in the judge's "
                         f"reply {preview}")
    values: set[float] = set()
    for match in _NUMBER.finditer(stripped):
        try:
            values.add(_value(match, stripped))
        except _Unreadable as exc:
            raise JudgeError(f"{exc} in the judge's reply {preview}") from None
    if len(values) == 1:
        return ScoreReading(values.pop(), "bare")
    if not values:
        raise JudgeError(f"no score in the judge's reply {preview}")
    raise JudgeError(f"several numbers and none marked as the score in the judge's reply {preview}")


def _json_score(text: str, preview: str) -> float | None:
    """The score of a reply that is a JSON object with a score key; ``None`` for any other reply."""
    fenced = _FENCED_JSON.match(text)
    source = fenced.group(1) if fenced else text
    if not source.startswith("{"):
        return None
    try:
        parsed = json.loads(source)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    for key in JSON_KEYS:
        if key not in parsed:
            continue
        value = parsed[key]
        if isinstance(value, str):
            return read_number(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise JudgeError(f"the JSON key {key!r} holds {json.dumps(value)[:40]}, not a number, in the judge's "
                             f"reply {preview}")
        return _finite(float(value))
    return None


def _keyed(text: str) -> list[tuple[str, float | _Unreadable]]:
    """Each keyed score of ``text`` in order: its snippet (key to number) and its value, or why it cannot be read.
    A number that two keys point to (``similarity_score: 0.8``) counts once."""
    found: dict[int, tuple[str, float | _Unreadable]] = {}
    for key in _KEY.finditer(text):
        position = key.end()
        scale = _SCALE.match(text, position)
        if scale is not None:
            position = scale.end()
        position = _SEPARATOR.match(text, position).end()
        if position - key.end() > 40:
            continue
        apart = _DASH_APART.match(text, position)
        match = _NUMBER.match(text, position)
        if apart is not None:
            number = _NUMBER.match(text, apart.end())
            end = number.end() if number else apart.end()
            found[apart.start()] = (text[key.start():end],
                                    _Unreadable(f"a {apart.group(1)!r} set apart from the number (a sign or a dash?)"))
        elif match is not None:
            try:
                value: float | _Unreadable = _value(match, text)
            except _Unreadable as exc:
                value = exc
            found[match.start()] = (text[key.start():match.end()], value)
    return [found[start] for start in sorted(found)]


def _value(match: re.Match[str], text: str) -> float:
    """The value of one :data:`_NUMBER` match in ``text``.

    Raises:
        _Unreadable: the token gives no single number (see the module docstring).
    """
    written = match.group(0).strip()
    if match.group("sign") == "±":
        raise _Unreadable(f"{written!r} has no single value")
    tail = text[match.end():]
    if _RANGE_AFTER.match(tail):
        raise _Unreadable(f"a range starting at {written!r}")
    if _OPERATOR_AFTER.match(tail):
        raise _Unreadable(f"{written!r} followed by an operator")
    try:
        exponent = _signed_int(match.group("exponent") or match.group("power") or "0")
    except OverflowError:
        raise _Unreadable(f"{written!r} is out of range") from None
    number = _decimal(match.group("mantissa"), exponent)
    if match.group("sign") and match.group("sign") in MINUS_SIGNS:
        number = -number
    if match.group("denominator") is not None:
        denominator = match.group("denominator")
        sign = -1.0 if denominator[0] in MINUS_SIGNS else 1.0
        divisor = sign * _decimal(denominator.lstrip(MINUS_SIGNS + PLUS_SIGNS))
        if divisor == 0:
            raise _Unreadable(f"{written!r} divides by zero")
        number /= divisor
    elif match.group("percent"):
        number /= 100
    elif match.group("permille"):
        number /= 1000
    try:
        return _finite(number)
    except JudgeError as exc:
        raise _Unreadable(str(exc)) from None


def _decimal(digits: str, exponent: int = 0) -> float:
    """The unsigned value of written digits times ``10 ** exponent``: digits with at most one decimal mark (point or
    comma) and an optional vulgar fraction (``1½``). Read by ``float`` from a decimal string, so ``1.1e-05`` is the
    float ``1.1e-05`` exactly (correctly rounded), not ``1.1 * 10 ** -5``.

    Raises:
        _Unreadable: more than one mark, a comma that may be a thousands separator, a vulgar fraction with a decimal
            mark or an exponent.
    """
    fraction = 0.0
    if digits[-1] in _VULGAR:
        fraction = unicodedata.numeric(digits[-1])
        digits = digits[:-1]
        if (digits and not digits.isdigit()) or exponent:
            raise _Unreadable(f"{digits + '…'!r} mixes a fraction with a decimal or an exponent")
        return float(digits or "0") + fraction
    marks = [ch for ch in digits if ch in ".,"]
    if len(marks) > 1:
        raise _Unreadable(f"{digits!r} has {len(marks)} decimal or thousands marks")
    if marks == [","]:
        whole, decimals = digits.split(",")
        if len(decimals) == 3 and whole.strip("0"):
            raise _Unreadable(f"{digits!r} may be a decimal comma or a thousands separator")
        digits = f"{whole}.{decimals}"
    return float(f"{digits}e{exponent}")


def _signed_int(text: str) -> int:
    """An exponent's value (signs as in a number).

    Raises:
        OverflowError: more than 4 digits (the number is 0 or infinite in a float anyway).
    """
    digits = text.lstrip(MINUS_SIGNS + PLUS_SIGNS)
    if len(digits) > 4:
        raise OverflowError(text)
    return -int(digits) if text[0] in MINUS_SIGNS else int(digits)


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise JudgeError(f"the judge's score {value} is not a finite number")
    return value + 0.0  # -0.0 is 0


def _quote(text: str) -> str:
    return repr(text[:120].replace("\n", " "))
