"""The reference solution (gold answers) and the headline it gets: 1.0 in every offline category but for seven
items whose ground truth no output can satisfy (the official evaluator agrees on each, see test_parity.py), and
the leaderboard's sections computed from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.benchmarks.bfcl import BFCLBenchmark
from runner.benchmarks.bfcl.categories import CATEGORIES
from runner.benchmarks.bfcl.headline import score_rows
from runner.core.results import ResultRow

UNSATISFIABLE = {
    # An ArrayList of `any` keeps every element as text, while the answer holds numbers and booleans.
    "simple_java_36": "value_error:list/tuple", "simple_java_65": "value_error:list/tuple",
    # The answer's map value is a string where a list of allowed values is expected.
    "simple_java_64": "value_error:dict_value",
    # Required parameters whose list of allowed values is empty.
    "live_simple_106-63-0": "simple_function_checker:missing_required",
    "live_simple_112-68-0": "simple_function_checker:missing_required",
    # The answer uses a parameter the function does not have (and not the required one it has).
    "live_multiple_862-181-3": "simple_function_checker:unexpected_param",
    "live_multiple_964-207-0": "simple_function_checker:missing_required",
}


def test_the_reference_passes_every_item_it_can(bfcl_tasks) -> None:
    benchmark = BFCLBenchmark()
    rows, failures = [], {}
    for category in CATEGORIES:
        for task in bfcl_tasks[category]:
            result = task.metrics[0](benchmark.reference(task))
            if result.result != 1.0:
                failures[task.id] = result.metadata["error_type"]
            rows.append(ResultRow(task.id, 0, "ok", task.tags, {"accuracy": result.result}))
    assert failures == UNSATISFIABLE
    headline = score_rows(rows)
    assert headline.components == pytest.approx({
        "Overall Acc": 0.1 * 0.9975 + 0.1 * (1 - 4 / 1351) + 0.1 + 0.3, "Non-Live Simple AST": 0.99,
        "Non-Live AST Acc": 0.9975, "Live Acc": 1 - 4 / 1351, "Multi Turn Acc": 1.0, "Irrelevance Detection": 1.0,
        "Relevance Detection": 1.0,
    })
    assert headline.score == headline.components["Overall Acc"]


def test_a_slice_through_the_command_line(cli, bfcl_dir: Path, tmp_path: Path) -> None:
    result = cli("--benchmark", "bfcl", "--solution", "reference", "--data-dir", str(bfcl_dir), "--sequential",
                 "-B", "per_category=2", "--storage", str(tmp_path / "run"))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert result.returncode == 0 and summary["completed"] == 34 and summary["errors"] == 0
    assert set(summary["by_category"]) == set(CATEGORIES)
    assert summary["benchmark_version"] == "2026.3.23"
    assert summary["score"] == summary["score_components"]["Overall Acc"] == pytest.approx(0.6)
    record = json.loads(next((tmp_path / "run" / "records").glob("multi*base_1/0.json")).read_text())
    assert record["task_id"] == "multi_turn_base_1" and record["output"][0] == ["[ls(a=True)]"]
