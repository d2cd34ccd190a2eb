"""Scoring one item: every metric of its task called once on the solution's output, each under its time limit,
each result kept as the plain value it is (or the error it raised)."""

from __future__ import annotations

import asyncio
import decimal
import inspect
import math
import numbers
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from runner.core.metric import MetricBase, MetricError, MetricResult, MetricType
from runner.core.record import ErrorInfo, MetricRecord
from runner.core.signature import is_async
from runner.core.storable import storable
from runner.core.solution import SolutionOutput
from runner.engine.item import watchdog
from runner.engine.item.guard import guarded
from runner.engine.item.outcome import error_info
from runner.engine.item.build_record import cut_repr
from runner.engine.item.call_solution import in_daemon_thread


async def score(metrics: list[MetricBase], output: SolutionOutput, limit: float | None,
                in_thread: bool) -> list[MetricRecord]:
    """Call each of ``metrics`` once on ``output``, one after the other, each within ``limit`` seconds (``None``: no
    limit); sync metrics in daemon threads when ``in_thread``. One :class:`MetricRecord` per metric, in order;
    nothing is raised (see :func:`run_metric`)."""
    return [await run_metric(metric, output, limit, in_thread) for metric in metrics]


class NotScored(MetricBase):
    """Stands for a metric that could not score an item's record (it blocked its event loop); raises."""

    def __init__(self, metric: MetricBase, reason: str) -> None:
        super().__init__(name=metric.name, metric_type=metric.metric_type, categories=metric.categories)
        self.reason = reason

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        raise RuntimeError(f"not scored: {self.reason}")


async def _call_metric(metric: MetricBase, output: SolutionOutput, in_thread: bool) -> Any:
    """``metric(output)``, awaited; a sync metric in a daemon thread when ``in_thread``."""
    result = await in_daemon_thread(metric, output) if in_thread and not is_async(metric) else metric(output)
    if inspect.isawaitable(result):
        result = await result
    return result


async def run_metric(metric: MetricBase, output: SolutionOutput, limit: float | None,
                      in_thread: bool) -> MetricRecord:
    """Call ``metric`` once, within ``limit`` seconds (``None``: no limit); whatever it raises, and running past the
    limit, becomes the metric's error (a :class:`MetricError` keeps its code and metadata).

    The result is stored as what it is, as a plain Python value (:func:`plain_result`): a NaN or an infinity
    stays one (the record spells it ``"NaN"``, ``"Infinity"``), and ``None`` or a string from a ``NUMERICAL``
    metric is kept too; the report counts those as results it could not use.
    """
    allows_infinite = bool(getattr(metric, "allows_infinite", False))
    watchdog.phase(f"metric {metric.name!r}", limit)
    try:
        returned = await guarded(_call_metric(metric, output, in_thread), limit)
        result, message, metadata = (returned.result, returned.message, returned.metadata) \
            if isinstance(returned, MetricResult) else (returned, None, None)
        result = corpus_value(result) if metric.metric_type is MetricType.CORPUS else plain_result(result)
        if metric.metric_type is MetricType.CATEGORY and metric.categories and result not in metric.categories:
            raise ValueError(f"result {result!r} is not one of the categories {metric.categories}")
        return MetricRecord(
            name=metric.name,
            type=metric.metric_type,
            result=result,
            message=message,
            metadata=jsonable_metadata(metadata),
            allows_infinite=allows_infinite,
        )
    except asyncio.TimeoutError:
        late = ErrorInfo(type="TimeoutError", message=f"ran past its {limit:g} s limit (--metric-timeout)")
        return MetricRecord(name=metric.name, type=metric.metric_type, error=late)
    except Exception as exc:  # noqa: BLE001 - a failing metric is an error result, never a crash
        metadata = jsonable_metadata(exc.metadata) if isinstance(exc, MetricError) else None
        return MetricRecord(name=metric.name, type=metric.metric_type, error=error_info(exc), metadata=metadata,
                            allows_infinite=allows_infinite)


def jsonable_metadata(metadata: Any) -> Any:
    """A metric's metadata as JSON-ready values: text and integers made storable
    (:func:`runner.core.storable.storable`), an object JSON cannot hold as its ``repr``
    (:func:`~runner.engine.item.build_record.cut_repr`), and metadata that cannot be serialised even so (a reference
    cycle) as ``{"repr": ...}`` of the whole; never raises."""
    try:
        return to_jsonable_python(storable(metadata), fallback=cut_repr)
    except (PydanticSerializationError, TypeError, ValueError):
        return {"repr": cut_repr(metadata)}


def corpus_value(value: Any) -> Any:
    """A ``CORPUS`` metric's result as plain JSON data: tuples and lists as lists, mappings as objects with string
    keys, every scalar as :func:`plain_result` makes it (so ``(0.5, np.int64(3))`` is ``[0.5, 3]``).

    Raises:
        TypeError: a value with a part that is none of those (an object, a set).
    """
    if isinstance(value, (list, tuple)):
        return [corpus_value(part) for part in value]
    if isinstance(value, dict):
        return {str(key): corpus_value(part) for key, part in value.items()}
    return plain_result(value)


def plain_result(value: Any) -> bool | int | float | str | None:
    """A metric's result as a plain Python value: a numpy scalar (or any 0-d array) by its ``item()``, an
    integral number as ``int`` (exactly, however large), another real number or a ``Decimal`` as ``float``
    (``Decimal("NaN")`` is NaN), except one beyond a float's range (``Decimal("1e400")``, a ``Fraction`` of 400
    digits), which is the ``int`` nearest to it rather than an infinity it is not: a float that large could not
    keep its fractional part either. The report counts such integers as ``too_large``.

    Raises:
        TypeError: a value that is neither a number, a boolean, a label (``str``) nor ``None``.
    """
    if getattr(value, "shape", None) == () and callable(getattr(value, "item", None)):
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        try:
            result = float(value)
        except OverflowError:  # float(Fraction) past the range
            return round(value)
        finite = value.is_finite() if isinstance(value, decimal.Decimal) else not math.isinf(value)
        return round(value) if math.isinf(result) and finite else result
    raise TypeError(f"result {value!r} is a {type(value).__name__}; a metric's result is a number, a boolean, a "
                    "label (str) or None")
