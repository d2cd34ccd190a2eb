"""Metrics: score one solution output of one task.

The names and shapes follow AgentScope's evaluation API (``agentscope.evaluate``: ``MetricBase``, ``MetricResult``,
``MetricType``) so that its users' metrics run unchanged.
"""

from __future__ import annotations

import datetime as _dt
import math
from abc import ABC, abstractmethod
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from runner.core.solution import SolutionOutput


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


class MetricType(str, Enum):
    """How a metric's results aggregate.

    ``NUMERICAL`` results are numbers (or booleans, read as 0/1) and aggregate to mean, standard error, min and max;
    ``CATEGORY`` results are labels and aggregate to the share of each label. ``CORPUS`` results are the per-item
    inputs of an aggregate computed over the whole corpus at once, which no mean of per-item values equals (corpus
    BLEU from ``(reference, prediction)`` pairs, F1 over all pairs, a perplexity from every item's log-likelihood and
    length, lm-evaluation-harness's non-``mean`` aggregations): any JSON value, stored as it is, counted, and never
    averaged; the benchmark's headline computes the aggregate (:meth:`BenchmarkBase.score
    <runner.core.benchmark.BenchmarkBase.score>`, its ``by_category``).
    """

    CATEGORY = "category"
    NUMERICAL = "numerical"
    CORPUS = "corpus"


class MetricResult(BaseModel):
    """The result of one metric on one solution output.

    Args:
        name: the metric's name; it names the column in reports.
        result: a number (``NUMERICAL``; booleans count as 0/1) or a label (``CATEGORY``). Anything else is taken
            as it is and stored as the engine can (a NaN, ``None``, a numpy scalar: see
            :func:`runner.engine.item.scoring.plain_result`); the report counts what a mean cannot use, never hides it.
        message: a short human-readable explanation (optional).
        metadata: any JSON-serialisable detail a reader of the record may want (optional).
        created_at: ISO-8601 UTC timestamp, filled in when omitted.
    """

    name: str
    result: Any
    message: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: str = Field(default_factory=_utc_now)


CLAMPED_FROM = "clamped_from"
"""The ``metadata`` key under which a metric that clamps a value into its range keeps the value before clamping
(e.g. HotpotQA's judges with ``judge_clamp=true``); the report counts such results per metric (``clamped``)."""

SEVERAL_SCORES = "several_scores"
"""The ``metadata`` key under which a judged metric keeps the scores a judge's reply gave when it gave several that
disagree (``["Score: 1", "Score: 0"]``, as written, in order; the verdict read is the last,
:mod:`runner.benchmarks.judge_scores`); the report counts such results per metric (``several_scores``)."""


class MetricError(ValueError):
    """A metric's refusal to score, with a stable reason for programs and details for the record.

    Raised from a metric's ``__call__``: the engine records it as that metric's error with ``code`` in
    ``error.code`` and ``metadata`` as the metric's metadata (so that, e.g., the judge's reply is kept), and the
    report counts the metric's errors per code (``unusable`` in ``summary.json``).

    Args:
        message: one line saying what was wrong.
        metadata: JSON-serialisable details for the record (optional).
    """

    code: ClassVar[str] = "error"
    """The reason, in ``snake_case``."""

    def __init__(self, message: str, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.metadata = metadata


class JudgeScoreOutOfRange(MetricError):
    """A judge (a model, or a judging library such as DeepEval or Ragas) gave a score outside the range the metric
    declares, e.g. ``Score: 2`` meaning 2 of 10 where a number in [0, 1] was asked for. Never clamped silently:
    it is an error of the metric (``judge_score_out_of_range``), with the judge's reply in its metadata.

    Args:
        score: the score as read.
        low, high: the declared range (inclusive).
        metadata: details for the record (the judge's reply, its name).
    """

    code: ClassVar[str] = "judge_score_out_of_range"

    def __init__(self, score: float, low: float, high: float, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(f"the judge's score {score:g} is outside the metric's range [{low:g}, {high:g}]",
                         {**(metadata or {}), "score": score, "range": [low, high]})
        self.score = score


class MetricBase(ABC):
    """Base class of a metric: a callable that scores a :class:`SolutionOutput`.

    Subclasses call ``super().__init__(name=..., metric_type=...)`` and implement ``__call__`` (``async`` or plain)
    returning a :class:`MetricResult`. A metric is called exactly once per (task, repeat). A metric that needs the
    task (its ground truth, or an environment the solution changed) keeps a reference to it: each repeat runs on a
    deep copy of the task, and references shared between the task and its metrics stay shared inside that copy.

    A ``NUMERICAL`` result that is not a finite number (NaN, an infinity) is stored as it is and left out of the
    mean, counted per metric as ``non_finite``, unless the metric declares infinities legitimate values
    (``allows_infinite``; e.g. a perplexity or a count of turns that is infinite when the goal is never reached):
    then they aggregate as such (a mean of ``inf``). NaN is never a usable result. An integer no float can hold
    (beyond about ±1.8e308, such as ``abs(int(answer) - gold)`` for an answer of 400 nines) is stored exactly and
    left out of the mean too, counted as ``too_large``; it never becomes an infinity.

    Args:
        name: unique within a task; names the metric in records and reports.
        metric_type: :class:`MetricType`.
        description: optional text for reports.
        categories: the possible labels of a ``CATEGORY`` metric (required for those, as in AgentScope).
        allows_infinite: ``+inf`` and ``-inf`` are legitimate results of this ``NUMERICAL`` metric.

    Raises:
        ValueError: a ``CATEGORY`` metric without ``categories``.
    """

    def __init__(
        self,
        name: str,
        metric_type: MetricType | str = MetricType.NUMERICAL,
        description: str | None = None,
        categories: list[str] | None = None,
        allows_infinite: bool = False,
    ) -> None:
        self.name = name
        self.metric_type = MetricType(metric_type)
        self.description = description
        if self.metric_type is MetricType.CATEGORY and categories is None:
            raise ValueError(f"metric {name!r}: a CATEGORY metric needs its list of categories")
        self.categories = categories
        self.allows_infinite = allows_infinite

    @abstractmethod
    def __call__(self, solution: SolutionOutput) -> Any:
        """Score ``solution``; return a :class:`MetricResult` (or an awaitable of one)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, metric_type={self.metric_type.value!r})"


def number(value: Any, infinite_ok: bool = False) -> float | None:
    """A ``NUMERICAL`` result as a usable float (booleans as 0/1), or ``None``: not a number, NaN, an infinity
    the metric does not allow (``infinite_ok``), or an integer no float can hold (beyond about ±1.8e308; the record
    keeps it exactly, :func:`runner.core.storable.too_large`). The one rule of which results a mean may use, for the
    report, the live statistics, the result shards and compare alike."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, (int, float)):
        return None
    try:
        result = float(value)
    except OverflowError:  # an int past a float's range: never rounded to an infinity it is not
        return None
    if math.isnan(result) or (math.isinf(result) and not infinite_ok):
        return None
    return result


Z_95 = 1.959963984540054
"""The two-sided 95 % quantile of the standard normal distribution."""


def mean_interval(mean: float | None, stderr: float | None, low: float | None = None,
                  high: float | None = None) -> tuple[float, float] | None:
    """The 95 % interval of a mean, ``mean ± Z_95 * stderr`` (the normal approximation), cut at ``low`` and ``high``:
    the smallest and largest value the mean is over (a mean cannot leave them; the report's charts cut their
    whiskers there too). So a 0/1 metric's interval stays within [0, 1]: 1 right answer in 7 gives [0, 0.423], not
    [-0.137, 0.423]. ``None`` without a mean or a standard error (fewer than 2 values)."""
    if mean is None or stderr is None:
        return None
    start, end = mean - Z_95 * stderr, mean + Z_95 * stderr
    if low is not None and not math.isinf(low):
        start = max(start, low)
    if high is not None and not math.isinf(high):
        end = min(end, high)
    return start, end
