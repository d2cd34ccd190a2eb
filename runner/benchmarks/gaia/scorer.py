"""GAIA's official scorer, ported rule for rule: quasi exact match whose normalisation follows the ground truth's type.

Source: the GAIA leaderboard space, ``https://huggingface.co/spaces/gaia-benchmark/leaderboard`` (branch ``main``),
file ``scorer.py``, functions ``question_scorer``, ``normalize_number_str``, ``split_string`` and
``normalize_str``: the version that reads a missing answer (``None``) as the text ``"None"``, which the space's
``app.py`` calls as ``question_scorer(task["model_answer"], gold["Final answer"])`` on every line of a submission.
``tests/benchmarks/gaia/official_scorer.py`` vendors that text, and the parity tests compare the two on generated
and hand-picked pairs.

The rules (the ground truth decides the branch, in this order):

1. **Number**: the ground truth parses with Python's ``float`` (so ``"17"``, ``" 3.5 "``, ``"1e3"``, ``"nan"``,
   ``"inf"``, ``"1_000"``). The answer loses every ``$``, ``%`` and ``,`` and must parse with ``float`` to the same
   value (an answer that does not parse is read as infinity, so it equals an ``"inf"`` ground truth; ``nan`` never
   equals anything).
2. **List**: the ground truth holds a ``,`` or a ``;``. Both are split on every ``,`` and ``;``; a different number
   of elements fails; elements are then compared pairwise, as numbers where the ground truth's element parses
   (rule 1), else as strings with all whitespace removed and lower-cased, punctuation kept.
3. **String**: all whitespace removed, punctuation (``string.punctuation``) removed, lower-cased, then equal.

Quirks kept because the leaderboard has them: an answer that is a number in words never matches a numeric ground
truth; ``"1,000"`` as a ground truth is a two-element list (``"1000"`` fails it, ``"1,000"`` and ``"1;0"`` pass);
``"$5"`` as a ground truth is a string, so ``"5"`` and ``"5$"`` pass it; any answer that does not parse as a number
passes a ground truth of ``"inf"``; punctuation counts inside list elements (``"St Louis"`` fails ``"St. Louis"``
there, but passes it as a whole string); whitespace never counts (``"sea gull"`` equals ``"seagull"``).

The official function prints one line per call and warns (``UserWarning``) on lists of different lengths; the port
does neither (the verdict is the same).
"""

from __future__ import annotations

import math
import re
import string
from typing import Any

LIST_SEPARATORS = (",", ";")
"""Characters that make a ground truth a list, and split answers into elements (``split_string``'s default)."""

_SPLIT = re.compile("[" + "".join(LIST_SEPARATORS) + "]")
_WHITESPACE = re.compile(r"\s")
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)


def is_float(value: Any) -> bool:
    """Whether ``float(value)`` succeeds: the official ``is_float``, which decides the number branch.

    Raises:
        TypeError: ``value`` is neither a string nor a number (the official function raises it too: it catches
            ``ValueError`` only).
    """
    try:
        float(value)
    except ValueError:
        return False
    return True


def normalize_number_str(number_str: str) -> float:
    """The answer as a number: ``$``, ``%`` and ``,`` removed, then ``float``; infinity when it does not parse
    (the official ``normalize_number_str``)."""
    for char in ("$", "%", ","):
        number_str = number_str.replace(char, "")
    try:
        return float(number_str)
    except ValueError:
        return math.inf


def split_string(text: str) -> list[str]:
    """``text`` split on every ``,`` and ``;`` (the official ``split_string``; empty elements kept)."""
    return _SPLIT.split(text)


def normalize_str(text: str, remove_punct: bool = True) -> str:
    """``text`` without any whitespace, lower-cased, and without ``string.punctuation`` when ``remove_punct``
    (the official ``normalize_str``)."""
    no_spaces = _WHITESPACE.sub("", text)
    if remove_punct:
        return no_spaces.lower().translate(_NO_PUNCTUATION)
    return no_spaces.lower()


def answer_type(ground_truth: str) -> str:
    """The branch the ground truth selects: ``"number"``, ``"list"`` or ``"string"`` (see the module docstring)."""
    if is_float(ground_truth):
        return "number"
    if any(char in ground_truth for char in LIST_SEPARATORS):
        return "list"
    return "string"


def question_scorer(model_answer: str | None, ground_truth: str) -> bool:
    """Whether ``model_answer`` is right for ``ground_truth`` by GAIA's official rules (the module docstring).

    Args:
        model_answer: the answer as the leaderboard receives it (the ``model_answer`` of a submission line);
            ``None`` is read as the text ``"None"``.
        ground_truth: the task's ``Final answer``.

    Raises:
        TypeError: ``model_answer`` is not a string or ``None``, or ``ground_truth`` is not a string: the official
            function fails on those too (``str.replace`` or ``re.sub`` of a number); turn an answer into its
            submission text first (:func:`runner.benchmarks.gaia.submission.answer_text`).
    """
    if model_answer is None:
        model_answer = "None"
    if not isinstance(model_answer, str):
        raise TypeError(f"model_answer must be a string or None, got {type(model_answer).__name__}")
    if not isinstance(ground_truth, str):
        raise TypeError(f"ground_truth must be a string, got {type(ground_truth).__name__}")
    kind = answer_type(ground_truth)
    if kind == "number":
        return normalize_number_str(model_answer) == float(ground_truth)
    if kind == "list":
        truth_items = split_string(ground_truth)
        answer_items = split_string(model_answer)
        if len(truth_items) != len(answer_items):
            return False
        return all(
            normalize_number_str(answer) == float(truth) if is_float(truth)
            else normalize_str(answer, remove_punct=False) == normalize_str(truth, remove_punct=False)
            for answer, truth in zip(answer_items, truth_items)
        )
    return normalize_str(model_answer) == normalize_str(ground_truth)
