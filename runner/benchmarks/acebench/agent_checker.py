"""Scoring of the agent categories: end state (end-to-end accuracy) and milestones (process accuracy).

Official rules from the authors' ``eval_main.py`` (``agent_eval``, ``agent_eval_process``) and
``model_eval/checker.py`` (``agent_checker``), forks zeppombal/ACEBench at 8118378 and hjc18/ACEBench at 65cd252.
"""

from __future__ import annotations

import math
from typing import Any

from runner.benchmarks.acebench.environment import canonical_app
from runner.benchmarks.acebench.normal_checker import Verdict


def check_end_state(state: list[dict[str, Any]], ground_truth: Any, strict: bool = False) -> Verdict:
    """Is the end ``state`` (``[{app: {attribute: value}}]``) the expected one?

    Official: the number of apps must match; each expected app is looked up by its exact name; when found, every
    attribute of the model's app must exist in the expectation, a dict-valued attribute is compared on the
    expected keys only (extra keys in the model's value are ignored) and other values by ``==``. Quirk: an expected
    app that is not found (the data misspells ``ReminderApi`` as ``ReminderAPI`` or ``Reminderpi`` and ``BaseApi``
    as ``BaseAPI``) is not checked at all; it inherits the previous app's verdict.

    Strict: app names are normalised (:func:`canonical_app`), a missing app fails, and every attribute must equal
    the expectation exactly (same keys; numbers with relative tolerance 1e-9).
    """
    expected = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    if not isinstance(state, list) or len(expected) != len(state):
        return Verdict(False, "wrong number of class", f"expected {len(expected)} apps, got "
                                                       f"{len(state) if isinstance(state, list) else 'none'}")
    if strict:
        return _strict_state(state, expected)
    verdict = Verdict(True)
    for app in expected:
        keys = set(app)
        matched = next((m for m in state if isinstance(m, dict) and set(m) == keys), None)
        if matched:
            verdict = _official_app(matched, app)
        if not verdict.valid:
            return verdict
    return verdict


def _official_app(model: dict[str, Any], expected: dict[str, Any]) -> Verdict:
    name = next(iter(expected))
    gold, produced = next(iter(expected.values())), next(iter(model.values()))
    for attribute, value in produced.items():
        if attribute not in gold:
            return Verdict(False, "class attributes wrong", f"{name}.{attribute} is not in the ground truth")
        wanted = gold[attribute]
        if isinstance(wanted, dict):
            for key, item in wanted.items():
                if not isinstance(value, dict) or key not in value or item != value[key]:
                    return Verdict(False, "class attributes wrong", f"{name}.{attribute}.{key} differs")
        elif wanted != value:
            return Verdict(False, "class attributes wrong", f"{name}.{attribute} differs")
    return Verdict(True)


def _strict_state(state: list[dict[str, Any]], expected: list[dict[str, Any]]) -> Verdict:
    produced = {canonical_app(next(iter(m))): next(iter(m.values())) for m in state if isinstance(m, dict) and m}
    for app in expected:
        name = canonical_app(next(iter(app)))
        if name not in produced:
            return Verdict(False, "missing class", f"the end state has no {name}")
        if not deep_equal(produced[name], next(iter(app.values()))):
            return Verdict(False, "class attributes wrong", f"{name} differs from the ground truth")
    return Verdict(True)


def deep_equal(a: Any, b: Any) -> bool:
    """Exact structural equality; numbers (not booleans) equal within relative tolerance 1e-9."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def milestone_fraction(calls: list[str], milestones: list[str], strict: bool = False) -> float:
    """The share of ``milestones`` found in ``calls`` in order, each compared after ``strip``; 1.0 when there are
    no milestones.

    Official (the authors' ``agent_eval_process``): a greedy scan, and a milestone that is not found uses up the rest
    of the calls, so every later milestone counts as missed too. Strict: a milestone that is not found is skipped
    without moving on, so later ones can still be found.
    """
    if not milestones:
        return 1.0
    position, found = 0, 0
    for stone in milestones:
        target = str(stone).strip()
        index = next((i for i in range(position, len(calls)) if str(calls[i]).strip() == target), None)
        if index is not None:
            found += 1
            position = index + 1
        elif not strict:
            position = len(calls)
    return found / len(milestones)


def process_accuracy(calls: list[str], milestones: Any, end_to_end_correct: bool, strict: bool = False) -> float:
    """Process accuracy of one task: 1.0 when the end state is right; otherwise the milestone fraction, the best
    over alternative milestone lists when there are several (official: each alternative rounded to 3 places
    first, as the authors do; strict: unrounded)."""
    if end_to_end_correct:
        return 1.0
    if milestones and isinstance(milestones[0], list):
        fractions = [milestone_fraction(calls, alternative, strict) for alternative in milestones]
        return max(fractions if strict else [round(f, 3) for f in fractions])
    return milestone_fraction(calls, milestones or [], strict)
