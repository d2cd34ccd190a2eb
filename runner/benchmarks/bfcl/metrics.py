"""BFCL's per-item metric, ``accuracy``: 1.0 when the official checks pass (:mod:`.scoring`), else 0.0."""

from __future__ import annotations

import json
from typing import Any

from runner.benchmarks.bfcl.scoring import check_ast, check_multi_turn, check_relevance
from runner.core.metric import MetricBase, MetricResult, MetricType
from runner.core.solution import SolutionOutput

ACCURACY = "accuracy"


def _short(error: Any, limit: int = 500) -> str | None:
    if not error:
        return None
    parts = error if isinstance(error, list) else [error]
    text = "; ".join(part if isinstance(part, str) else json.dumps(part, default=repr)[:limit] for part in parts)
    return text[:limit]


class BFCLAccuracy(MetricBase):
    """1.0 when the item's output passes BFCL's checks, else 0.0; the official error type in ``metadata``.

    Args:
        kind: ``ast``, ``relevance`` or ``multi_turn`` (:func:`runner.benchmarks.bfcl.categories.kind_of`).
        category: the item's category.
        language: ``python``, ``java`` or ``javascript``.
        functions: the item's function docs as in the data (AST items).
        ground_truth: the possible answers (AST items) or the ground-truth calls per turn (multi-turn items).
        entry: ``id``, ``initial_config`` and ``involved_classes`` (multi-turn items).
    """

    def __init__(self, kind: str, category: str, language: str, functions: list[dict[str, Any]] | None = None,
                 ground_truth: Any = None, entry: dict[str, Any] | None = None) -> None:
        super().__init__(ACCURACY, MetricType.NUMERICAL, "BFCL accuracy (the official checker's verdict)")
        self.kind, self.category, self.language = kind, category, language
        self.functions, self.ground_truth, self.entry = functions or [], ground_truth, entry or {}

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        output = solution.output
        if self.kind == "relevance":
            verdict = check_relevance(output, self.category)
        elif self.kind == "multi_turn":
            verdict = check_multi_turn(output, self.ground_truth, self.entry)
        else:
            verdict = check_ast(output, self.functions, self.ground_truth, self.category, self.language)
        return MetricResult(name=self.name, result=1.0 if verdict["valid"] else 0.0,
                            message=_short(verdict.get("error")),
                            metadata={"error_type": verdict.get("error_type") or None})
