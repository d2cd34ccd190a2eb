"""Live statistics of a run: running means, 95 % intervals and per-category means from the items' acknowledgements.

The driver sees each finished item's usable metric values (small numbers, carried in its acknowledgement; no record
is read back) and keeps running sums only, so its memory does not grow with the run: per metric a count, a mean and
the sum of squared deviations (B. P. Welford, "Note on a method for calculating corrected sums of squares and
products", Technometrics 4(3), 1962), and per category and metric a count and a sum.

The interval is the normal one, mean ± 1.96 standard errors of the items seen so far (items as independent draws;
the final ``summary.json`` clusters the standard error by task when tasks repeat, see :mod:`runner.report.stats`),
cut at the smallest and largest value seen (:func:`runner.core.metric.mean_interval`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.core.metric import mean_interval, number


@dataclass
class Running:
    """A running mean and variance (Welford's update): ``n`` values, their ``mean``, ``m2`` (the sum of squared
    deviations from the mean), and the smallest and largest value (``low``, ``high``)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    low: float = math.inf
    high: float = -math.inf

    def add(self, value: float) -> None:
        """Account for one more value."""
        self.low, self.high = min(self.low, value), max(self.high, value)
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (value - self.mean)

    @property
    def stderr(self) -> float | None:
        """The standard error of the mean (``None`` under 2 values)."""
        if self.n < 2:
            return None
        return math.sqrt(self.m2 / (self.n - 1) / self.n)

    def interval(self) -> tuple[float, float] | None:
        """The normal 95 % interval of the mean, ``(low, high)``, cut at the values' range (``None`` under 2
        values)."""
        return mean_interval(self.mean, self.stderr, self.low, self.high)


@dataclass
class LiveStats:
    """The running statistics of one run's metrics.

    Args:
        headline: the metrics whose running mean the progress line shows, in order of preference (the first one
            that has values; ``BenchmarkBase.headline_metrics``); empty: the first metric seen.
    """

    headline: tuple[str, ...] = ()
    metrics: dict[str, Running] = field(default_factory=dict)
    categories: dict[str, dict[str, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(lambda: [0, 0.0])))

    def add(self, scores: Mapping[str, float], category: str | None = None) -> None:
        """Account for one item's usable metric values (``{metric: value}``) and its category."""
        for name, value in scores.items():
            self.metrics.setdefault(name, Running()).add(value)
            if category is not None:
                entry = self.categories[category][name]
                entry[0] += 1
                entry[1] += value

    def headline_metric(self) -> str | None:
        """The metric the progress line shows: the first of :attr:`headline` that has values, else the first metric
        seen; ``None`` before any value."""
        for name in self.headline:
            if name in self.metrics:
                return name
        return next(iter(self.metrics), None)

    def line(self) -> str:
        """``accuracy 0.731 [0.702, 0.760]`` for the headline metric (``""`` before any value)."""
        name = self.headline_metric()
        if name is None:
            return ""
        running = self.metrics[name]
        interval = running.interval()
        bounds = f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""
        return f"{name} {running.mean:.3f}{bounds}"

    def snapshot(self) -> dict[str, Any]:
        """``{"headline", "metrics": {name: {"mean", "ci95", "stderr", "n"}}, "by_category": {category: {name:
        {"mean", "n"}}}}``, JSON-ready."""
        metrics = {}
        for name, running in self.metrics.items():
            interval = running.interval()
            metrics[name] = {"mean": running.mean, "ci95": list(interval) if interval else None,
                             "stderr": running.stderr, "n": running.n}
        by_category = {category: {name: {"mean": total / count, "n": count} for name, (count, total) in
                                  sorted(names.items())} for category, names in sorted(self.categories.items())}
        return {"headline": self.headline_metric(), "metrics": metrics, "by_category": by_category}


def usable_scores(metrics: Iterable[tuple[str, Any]]) -> dict[str, float]:
    """The values a running mean can use, from ``(metric name, result)`` of one item: booleans as 0/1 and finite
    numbers (:func:`runner.core.metric.number`); NaN, infinities (even a metric's allowed ones: ``summary.json``
    aggregates those), integers no float can hold, labels and missing results are left out."""
    return {name: value for name, result in metrics if (value := number(result)) is not None}
