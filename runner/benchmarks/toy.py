"""The built-in ``toy`` benchmark: 100 arithmetic questions in five categories, generated deterministically.

It exists for the quick start and the tests; the ``calculator`` solution answers all of it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from runner.core.benchmark import BenchmarkBase
from runner.core.metric import MetricBase, MetricResult, MetricType
from runner.core.plugin import declare
from runner.core.results import Headline, RunResults
from runner.core.solution import SolutionOutput
from runner.core.task import Task

CATEGORIES = ("addition", "subtraction", "multiplication", "division", "mixed")


class NumericMatch(MetricBase):
    """1.0 when the output is a number equal to ``expected`` (``math.isclose``, relative tolerance 1e-9), else 0.0.

    A numeric string (``"42"``) counts as its number; anything else scores 0.0.
    """

    def __init__(self, expected: float, name: str = "exact-match") -> None:
        super().__init__(name=name, metric_type=MetricType.NUMERICAL, description="numeric exact match")
        self.expected = expected

    async def __call__(self, solution: SolutionOutput) -> MetricResult:
        value = solution.output
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                value = None
        correct = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isclose(value, self.expected, rel_tol=1e-9, abs_tol=1e-12)
        )
        return MetricResult(
            name=self.name,
            result=1.0 if correct else 0.0,
            message="correct" if correct else f"expected {self.expected}, got {solution.output!r}",
        )


def _question(rng: random.Random, category: str) -> tuple[str, float]:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 9)
    if category == "addition":
        return f"{a} + {b}", a + b
    if category == "subtraction":
        return f"{a} - {b}", a - b
    if category == "multiplication":
        return f"{a} * {c}", a * c
    if category == "division":
        return f"{a * c} / {c}", a
    return f"({a} + {b}) * {c} - {a}", (a + b) * c - a


@declare("toy")
class ToyBenchmark(BenchmarkBase):
    """100 arithmetic questions ("What is 12 * 7?"), 20 per category, the same on every machine.

    Args:
        n_tasks: how many questions (default 100), cycling through the categories.
        seed: the generator's seed.

    Tags: ``category`` (addition, subtraction, multiplication, division, mixed). Metric: ``exact-match``.
    Headline score: the mean exact match.
    """

    version = "1"
    headline_metrics = ("exact-match",)

    def __init__(self, n_tasks: int = 100, seed: int = 0) -> None:
        super().__init__(name="toy", description="arithmetic questions for the quick start")
        if n_tasks < 1:
            raise ValueError("n_tasks must be at least 1")
        self.n_tasks = n_tasks
        self.seed = seed

    def __len__(self) -> int:
        return self.n_tasks

    def __iter__(self) -> Iterator[Task]:
        rng = random.Random(self.seed)
        for index in range(self.n_tasks):
            category = CATEGORIES[index % len(CATEGORIES)]
            expression, answer = _question(rng, category)
            yield Task(
                id=f"toy-{index:03d}",
                input=f"What is {expression}?",
                ground_truth=answer,
                metrics=[NumericMatch(answer)],
                tags={"category": category},
            )

    def score(self, results: RunResults) -> Headline:
        """The mean of ``exact-match`` over all items, with its standard error."""
        metric = results.metrics.get("exact-match", {})
        return Headline(score=metric.get("mean"), stderr=metric.get("stderr"))
