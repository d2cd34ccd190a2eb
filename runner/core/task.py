"""A task: one evaluation unit (input, ground truth, metrics), as in AgentScope's ``Task``."""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from typing import Any

from runner.core.errors import InvalidTask
from runner.core.metric import MetricBase, MetricResult
from runner.core.solution import SolutionOutput


@dataclass
class Task:
    """One evaluation unit.

    Args:
        id: unique within the benchmark (any string; it is encoded into a path-safe key for storage).
            Non-string ids are converted with ``str``.
        input: what the solution receives (a prompt, a dict, anything picklable).
        ground_truth: the reference answer, for metrics and the ``reference`` solution.
        metrics: the metrics that score this task; names must be unique within the task.
        tags: string labels; ``tags["category"]`` groups the per-category report.
        metadata: anything else the solution or the metrics need (picklable).

    Raises:
        InvalidTask: (a ``ValueError``) an empty id or two metrics with the same name.
    """

    id: str
    input: Any = None
    ground_truth: Any = None
    metrics: list[MetricBase] = field(default_factory=list)
    tags: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str):
            self.id = str(self.id)
        if not self.id:
            raise InvalidTask("a task needs a non-empty id")
        names = [m.name for m in self.metrics]
        if len(names) != len(set(names)):
            raise InvalidTask(f"task {self.id!r}: metric names must be unique, got {names}")

    def fresh(self) -> Task:
        """A deep copy for one repeat: state changed by the solution (an environment) never leaks between repeats."""
        return copy.deepcopy(self)

    async def evaluate(self, solution: SolutionOutput) -> list[MetricResult]:
        """Run every metric once on ``solution`` (AgentScope's ``Task.evaluate``); a raising metric propagates."""
        results = []
        for metric in self.metrics:
            result = metric(solution)
            if inspect.isawaitable(result):
                result = await result
            results.append(result)
        return results
