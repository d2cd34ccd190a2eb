"""The built-in ``reference`` solution: answers every task with its benchmark's gold answer.

It is each benchmark's self-check: with it, a faithful scorer must give the benchmark's known reference values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runner.core.benchmark import BenchmarkBase
from runner.core.plugin import declare
from runner.core.solution import solution_factory
from runner.core.task import Task


@declare("reference", needs={"benchmark"})
@solution_factory
def reference(benchmark: BenchmarkBase) -> Callable[[Task], Any]:
    """Build the solution ``task -> benchmark.reference(task)`` (once per worker)."""

    def solve(task: Task) -> Any:
        return benchmark.reference(task)

    return solve
