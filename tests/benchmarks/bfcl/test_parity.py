"""Per-item agreement with the official evaluator (``bfcl-eval`` 2026.3.23, the reference scorer) in every offline
category: outputs of our own making (the gold answer as text and as tool calls, and realistic mistakes, see
``outputs.py``) get the same verdict and the same error type from both, item by item."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from runner.benchmarks.bfcl.categories import CATEGORIES, MULTI_TURN
from runner.core.solution import SolutionOutput
from tests.benchmarks.bfcl.outputs import multi_turn_variants, python_variants, relevance_variants, typed_variants

SINGLE_TURN = [c for c in CATEGORIES if c not in MULTI_TURN]


def _ours(task: Any, output: Any) -> tuple[bool, str | None]:
    result = task.metrics[0](SolutionOutput(output=output))
    return result.result == 1.0, result.metadata["error_type"]


def _variants(task: Any, seed: int) -> dict[str, Any]:
    category = task.tags["category"]
    if "relevance" in category:
        return relevance_variants(task, seed)
    if task.tags["language"] != "python":
        return typed_variants(task, seed)
    return python_variants(task, seed)


def _compare(task: Any, variants: dict[str, Any], official_verdict: Any, seen: Counter) -> list[str]:
    disagreements = []
    for name, output in variants.items():
        expected = official_verdict(task, output)
        valid, error_type = _ours(task, output)
        seen[(name, valid)] += 1
        if valid != expected["valid"] or error_type != expected["error_type"]:
            disagreements.append(f"{task.id} {name}: official {expected['valid']} {expected.get('error_type')}, "
                                 f"ours {valid} {error_type}")
    return disagreements


@pytest.mark.parametrize("category", SINGLE_TURN)
def test_every_single_turn_item_gets_the_official_verdict(category: str, bfcl_tasks, official_verdict) -> None:
    tasks = bfcl_tasks[category]
    seen: Counter = Counter()
    disagreements = []
    for seed, task in enumerate(tasks):
        disagreements += _compare(task, _variants(task, seed), official_verdict, seen)
    assert disagreements == []
    # The outputs exercise both verdicts in every category, with several kinds of mistake.
    assert any(valid for _, valid in seen) and any(not valid for _, valid in seen)
    assert len({name for name, valid in seen if not valid}) >= 3, seen


@pytest.mark.parametrize("category", MULTI_TURN)
def test_every_multi_turn_item_gets_the_official_verdict(category: str, bfcl_tasks, official_verdict) -> None:
    seen: Counter = Counter()
    disagreements = []
    for seed, task in enumerate(bfcl_tasks[category]):
        variants = multi_turn_variants(task, seed, every_kind=seed % 20 == 0)
        disagreements += _compare(task, variants, official_verdict, seen)
    assert disagreements == []
    assert seen[("gold", True)] == 200
    assert sum(count for (name, valid), count in seen.items() if not valid) >= 20, seen


def test_every_item_shows_the_model_what_bfcl_shows_it(bfcl_tasks, reference_scorer) -> None:
    """The questions, function docs (with BFCL's language notes) and held-out functions of every item equal those of
    the official loader for inference (``load_dataset_entry`` with its defaults but the memory prerequisites)."""
    for category in CATEGORIES:
        official = {entry["id"]: entry for entry in reference_scorer.utils.load_dataset_entry(
            category, include_prereq=False)}
        assert [task.id for task in bfcl_tasks[category]] == list(official)
        for task in bfcl_tasks[category]:
            entry = official[task.id]
            assert task.input["question"] == entry["question"], task.id
            assert task.input["functions"] == entry["function"], task.id
            assert task.input.get("missed_function", {}) == entry.get("missed_function", {}), task.id
