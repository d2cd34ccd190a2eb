"""BFCL's headline: the leaderboard's section accuracies and its Overall Acc.

Source: ``generate_leaderboard_csv`` and the helpers ``calculate_weighted_accuracy``,
``calculate_unweighted_accuracy``, ``calculate_percentage_weighted_accuracy`` and ``get_category_score`` of
``bfcl_eval/eval_checker/eval_runner_helper.py`` (``bfcl-eval`` 2026.3.23), column names from
``bfcl_eval/constants/column_headers.py`` (``COLUMNS_OVERALL``):

- a category's accuracy is its share of right items (``save_eval_results``: correct / total);
- Non-Live Simple AST = the unweighted mean of simple_python, simple_java and simple_javascript;
  Non-Live AST Acc = the unweighted mean of Simple AST, multiple, parallel and parallel_multiple;
- Live Acc = the mean of live_simple, live_multiple, live_parallel and live_parallel_multiple weighted by their
  numbers of items;
- Multi Turn Acc = the unweighted mean of the four multi-turn categories;
- Irrelevance Detection = the unweighted mean of irrelevance and live_irrelevance; Relevance Detection =
  live_relevance;
- Overall Acc = 10 % Non-Live AST Acc + 10 % Live Acc + 10 % Irrelevance Detection + 30 % Multi Turn Acc + 40 %
  Agentic Acc. The agentic categories (web search, memory) do not run offline and count 0, as the leaderboard
  counts every category it has no result for in Overall Acc: here Overall Acc is at most 0.6.

A section is given only when all its categories ran (the leaderboard shows "N/A" otherwise), Overall Acc only when
all 17 offline categories did. With repeats, a category's accuracy is the mean over its (task, repeat) items and
Live Acc weighs categories by their items. An item without a result (an error record) counts as wrong, as a missing
or undecodable answer does for BFCL.
"""

from __future__ import annotations

from collections import defaultdict

from runner.benchmarks.bfcl.categories import CATEGORIES
from runner.core.results import Headline, ResultRow

ACCURACY = "accuracy"
OVERALL_WEIGHTS = {"Non-Live AST Acc": 10, "Live Acc": 10, "Irrelevance Detection": 10, "Multi Turn Acc": 30,
                   "Agentic Acc": 40}
"""The Overall Acc weights (``[10, 10, 10, 30, 40]``, normalised by their sum)."""


def _value(row: ResultRow) -> float:
    value = row.scores.get(ACCURACY)
    return float(value) if isinstance(value, (int, float)) else 0.0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def category_accuracies(rows: list[ResultRow]) -> dict[str, tuple[float, int]]:
    """Category -> (accuracy, number of items) over the rows of BFCL's categories."""
    by_category: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        category = row.tags.get("category", "")
        if category in CATEGORIES:
            by_category[category].append(_value(row))
    return {category: (_mean(values), len(values)) for category, values in by_category.items()}


def sections(accuracies: dict[str, tuple[float, int]]) -> dict[str, float]:
    """The leaderboard's section accuracies for which every category ran."""
    acc = {category: value for category, (value, _) in accuracies.items()}
    result: dict[str, float] = {}

    def have(*names: str) -> bool:
        return all(name in acc for name in names)

    if have("simple_python", "simple_java", "simple_javascript"):
        result["Non-Live Simple AST"] = _mean([acc["simple_python"], acc["simple_java"], acc["simple_javascript"]])
        if have("multiple", "parallel", "parallel_multiple"):
            result["Non-Live AST Acc"] = _mean([result["Non-Live Simple AST"], acc["multiple"], acc["parallel"],
                                                acc["parallel_multiple"]])
    live = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
    if have(*live):
        total = sum(accuracies[name][1] for name in live)
        result["Live Acc"] = sum(accuracies[name][0] * accuracies[name][1] for name in live) / total
    multi = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
    if have(*multi):
        result["Multi Turn Acc"] = _mean([acc[name] for name in multi])
    if have("irrelevance", "live_irrelevance"):
        result["Irrelevance Detection"] = _mean([acc["irrelevance"], acc["live_irrelevance"]])
    if have("live_relevance"):
        result["Relevance Detection"] = acc["live_relevance"]
    return result


def score_rows(rows: list[ResultRow]) -> Headline:
    """The :class:`Headline` of a run's rows (``tags["category"]`` names the category)."""
    accuracies = category_accuracies(rows)
    components = sections(accuracies)
    score = None
    if all(category in accuracies for category in CATEGORIES):
        total = sum(OVERALL_WEIGHTS.values())
        score = 0.0
        for name, weight in OVERALL_WEIGHTS.items():  # in the order and arithmetic of the original
            score += components.get(name, 0.0) * (weight / total)
        components = {"Overall Acc": score, **components}
    return Headline(score=score, components=components)
