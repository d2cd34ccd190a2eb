"""Comparing the runner's lm-eval files with lm-eval's own, value by value."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

RESULT_KEYS = ("results", "groups", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better",
               "n-samples")
"""The parts of lm-eval's ``results_<date>.json`` that describe the evaluation (the rest describes the machine)."""


ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def differences(ours: Any, theirs: Any, rel: float, path: str = "") -> list[str]:
    """Where ``ours`` and ``theirs`` differ: numbers (and numbers written as strings, as lm-eval's samples write
    log-probabilities) beyond a relative ``rel``; anything else at all."""
    if isinstance(theirs, dict):
        if not isinstance(ours, dict) or set(ours) != set(theirs):
            return [f"{path}: keys {sorted(set(ours) if isinstance(ours, dict) else ours)} != {sorted(theirs)}"]
        return [d for key in theirs for d in differences(ours[key], theirs[key], rel, f"{path}.{key}")]
    if isinstance(theirs, list):
        if not isinstance(ours, list) or len(ours) != len(theirs):
            return [f"{path}: {ours!r} != {theirs!r}"]
        return [d for index, (a, b) in enumerate(zip(ours, theirs)) for d in differences(a, b, rel, f"{path}[{index}]")]
    if isinstance(ours, str) and isinstance(theirs, str) and ADDRESS.search(theirs):
        # lm-eval writes a task's functions by repr, with the address they had in its process.
        return [] if ADDRESS.sub("", ours) == ADDRESS.sub("", theirs) else [f"{path}: {ours!r} != {theirs!r}"]
    a, b = _number(ours), _number(theirs)
    if a is not None and b is not None and not (isinstance(ours, str) != isinstance(theirs, str)):
        if a == b or math.isclose(a, b, rel_tol=rel, abs_tol=rel):
            return []
        return [f"{path}: {ours!r} != {theirs!r}"]
    return [] if ours == theirs else [f"{path}: {ours!r} != {theirs!r}"]


def runner_files(run: Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The runner's ``lm_eval/results.json`` and ``lm_eval/samples_<task>.jsonl`` of the run at ``run``."""
    results = json.loads((run / "lm_eval" / "results.json").read_text())
    samples = {path.name.removeprefix("samples_").removesuffix(".jsonl"):
               [json.loads(line) for line in path.read_text().splitlines()]
               for path in (run / "lm_eval").glob("samples_*.jsonl")}
    return results, samples


def assert_same_as_lm_eval(run: Path, reference: tuple[dict[str, Any], dict[str, list[dict[str, Any]]]],
                           rel: float) -> None:
    """The run's results and samples hold lm-eval's values, document by document and aggregate by aggregate."""
    results, samples = runner_files(run)
    expected_results, expected_samples = reference
    found = [d for key in RESULT_KEYS for d in differences(results.get(key), expected_results.get(key), rel, key)]
    found += differences(results["task_hashes"], expected_results["task_hashes"], rel, "task_hashes")
    assert sorted(samples) == sorted(expected_samples)
    for task, lines in expected_samples.items():
        found += differences(samples[task], lines, rel, f"samples_{task}")
    assert found == [], "\n".join(found[:20])
