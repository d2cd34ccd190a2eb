"""Which metric results a report can use, and why not the others.

A ``NUMERICAL`` result is used when it is a boolean (0/1) or a finite number a float can hold, or an infinity of a
metric that allows them (``MetricBase(allows_infinite=True)``, kept in each record as ``allows_infinite``); a
``CATEGORY`` result when the metric did not raise. Everything else is counted per metric by reason (``unusable`` in
``summary.json``), never silently dropped.
"""

from __future__ import annotations

from runner.core.metric import MetricType, number
from runner.core.record import MetricRecord
from runner.core.storable import too_large

UNUSABLE_REASONS = ("error", "non_finite", "not_a_number", "too_large")
"""Why a metric's result was left out, always listed in ``unusable``: the metric raised (``error``; an error with
a code, such as ``judge_score_out_of_range``, is counted under its code instead), the result is NaN or an
infinity the metric does not allow (``non_finite``), a ``NUMERICAL`` result is no number (``not_a_number``:
``None``, a string), or it is a number no float can hold (``too_large``: an integer beyond about ±1.8e308, which
the record keeps exactly, :func:`runner.core.storable.too_large`)."""


def unusable_reason(metric: MetricRecord) -> str | None:
    """Why a report cannot use ``metric``'s result (one of :data:`UNUSABLE_REASONS`, or the code of a coded
    error), or ``None`` when it can."""
    if metric.error is not None:
        return metric.error.code or "error"
    if metric.type is not MetricType.NUMERICAL or number(metric.result, metric.allows_infinite) is not None:
        return None
    if too_large(metric.result):
        return "too_large"
    return "non_finite" if isinstance(metric.result, float) else "not_a_number"
