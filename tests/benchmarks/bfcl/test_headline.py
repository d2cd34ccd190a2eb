"""The headline equals the leaderboard's own aggregation: ``generate_leaderboard_csv`` of the official evaluator,
fed the same per-category accuracies, prints the same section accuracies and Overall Acc (to its two decimals)."""

from __future__ import annotations

import csv
import random
from pathlib import Path

from runner.benchmarks.bfcl.categories import CATEGORIES
from runner.benchmarks.bfcl.headline import score_rows
from runner.core.results import ResultRow
from tests.benchmarks.bfcl import official

SIZES = {"simple_python": 400, "simple_java": 100, "simple_javascript": 50, "multiple": 200, "parallel": 200,
         "parallel_multiple": 200, "irrelevance": 240, "live_simple": 258, "live_multiple": 1053, "live_parallel": 16,
         "live_parallel_multiple": 24, "live_irrelevance": 884, "live_relevance": 16, "multi_turn_base": 200,
         "multi_turn_miss_func": 200, "multi_turn_miss_param": 200, "multi_turn_long_context": 200}
COLUMNS = ("Overall Acc", "Non-Live AST Acc", "Non-Live Simple AST", "Live Acc", "Multi Turn Acc",
           "Relevance Detection", "Irrelevance Detection")


def _rows(categories, seed=7):
    generator = random.Random(seed)
    rows = []
    for category in categories:
        rate = generator.random()
        rows += [ResultRow(f"{category}_{i}", 0, "ok", {"category": category},
                           {"accuracy": float(generator.random() < rate)}) for i in range(SIZES[category])]
    return rows


def _official(rows, reference_scorer, folder: Path) -> dict[str, str]:
    table: dict[str, dict] = {official.PROMPT_MODEL: {}}
    for category in {row.tags["category"] for row in rows}:
        values = [row.scores["accuracy"] for row in rows if row.tags["category"] == category]
        table[official.PROMPT_MODEL][category] = {"accuracy": sum(values) / len(values), "total_count": len(values)}
    folder.mkdir()
    reference_scorer.eval_runner.generate_leaderboard_csv(table, folder)
    with open(folder / "data_overall.csv", newline="") as handle:
        return next(csv.DictReader(handle))


def _percent(value: float) -> str:
    return "{:.2f}%".format(value * 100)


def test_sections_and_overall_match_the_leaderboard(reference_scorer, tmp_path) -> None:
    rows = _rows(CATEGORIES)
    headline = score_rows(rows)
    printed = _official(rows, reference_scorer, tmp_path / "score")
    assert set(headline.components) == set(COLUMNS)
    for column in COLUMNS:
        assert _percent(headline.components[column]) == printed[column], column
    assert headline.score == headline.components["Overall Acc"] <= 0.6
    assert printed["Web Search Acc"] == printed["Memory Acc"] == "N/A"


def test_a_section_with_a_category_missing_is_left_out(reference_scorer, tmp_path) -> None:
    rows = _rows([c for c in CATEGORIES if c != "live_parallel"])
    headline = score_rows(rows)
    printed = _official(rows, reference_scorer, tmp_path / "score")
    with open(tmp_path / "score" / "data_live.csv", newline="") as handle:
        live = next(csv.DictReader(handle))
    # The leaderboard's live table shows the AST summary as N/A; its overall table (and Overall Acc) count the
    # missing category as 0. Here a section is given only when all its categories ran, and Overall Acc only with all.
    assert live["AST Summary"] == "N/A" and "Live Acc" not in headline.components
    assert printed["Live Acc"] != "N/A" and printed["Overall Acc"] != "N/A" and headline.score is None
    assert _percent(headline.components["Multi Turn Acc"]) == printed["Multi Turn Acc"]


def test_an_item_without_a_result_counts_as_wrong() -> None:
    rows = [ResultRow("live_relevance_0", 0, "ok", {"category": "live_relevance"}, {"accuracy": 1.0}),
            ResultRow("live_relevance_1", 0, "error", {"category": "live_relevance"}, {})]
    assert score_rows(rows).components == {"Relevance Detection": 0.5}
