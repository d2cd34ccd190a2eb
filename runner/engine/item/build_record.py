"""One item's record: the :class:`~runner.core.record.TaskRecord` written for it (:func:`build_record`), with the
roll-up of its solution's outcome and its metrics into one status (:func:`_roll_up`), and the :class:`ItemResult`
its executor gets back (:func:`acknowledgement`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from runner.core.metric import MetricType
from runner.core.record import ErrorInfo, MetricRecord, TaskRecord, Timings, TokenUsage
from runner.core.solution import SolutionOutput
from runner.core.storable import storable
from runner.core.task import Task
from runner.engine.item.outcome import ItemResult, SolutionOutcome
from runner.engine.live import usable_scores
from runner.engine.plan import WorkItem
from runner.storage.manifest import utc_now


@dataclass(frozen=True)
class _Verdict:
    """An item's status, rolled up from its solution's outcome and its metrics (:func:`_roll_up`).

    Args:
        status: ``ok``, ``error`` or ``timeout``.
        error: the record's error (``None`` for ``ok``): the solution's, a serialisation error, ``SolutionFailed``
            (the solution said ``success=False``), or a ``MetricError``/``MetricTimeout`` summing up the failed
            metrics.
        cause: what made the item fail, for the driver (without a traceback): the solution's error, else the first
            failing metric's, else :attr:`error`.
    """

    status: str
    error: ErrorInfo | None = None
    cause: ErrorInfo | None = None


def scored_output(outcome: SolutionOutcome) -> SolutionOutput:
    """What the metrics score: the solution's output, or ``SolutionOutput(success=False)`` for a solution that did
    not return, so that a failure counts against the score rather than vanishing from it."""
    return outcome.output if outcome.output is not None else SolutionOutput(success=False, output=None)


def _roll_up(outcome: SolutionOutcome, output: SolutionOutput, serial_error: ErrorInfo | None,
             metrics: list[MetricRecord]) -> _Verdict:
    """The item's status: the solution's (``error`` or ``timeout``) if it did not return ``ok``; else ``error``
    when its output cannot be serialised or says ``success=False``; else ``timeout`` when a metric ran past its
    limit, ``error`` when one raised; else ``ok``."""
    status, error = outcome.status, outcome.error
    if serial_error is not None and status == "ok":
        status, error = "error", serial_error
    if status == "ok" and not output.success:
        status, error = "error", ErrorInfo(type="SolutionFailed", message="the solution reported success=False")
    failed = [m for m in metrics if m.error is not None]
    if failed and status == "ok":
        late = any(m.error is not None and m.error.type == "TimeoutError" for m in failed)
        status = "timeout" if late else "error"
        error = ErrorInfo(
            type="MetricTimeout" if late else "MetricError",
            message="; ".join(f"metric {m.name!r}: {m.error.type}: {m.error.message}" for m in failed if m.error),
        )
    cause = None
    if status != "ok":
        cause = outcome.error or next((m.error for m in failed), None) or error
    if cause is not None:
        cause = cause.model_copy(update={"traceback": None})
    return _Verdict(status, error, cause)


def build_record(item: WorkItem, task: Task, outcome: SolutionOutcome, output: SolutionOutput,
                 metrics: list[MetricRecord], *, run_id: str, attempt: int, worker: dict[str, Any],
                 usage: dict[str, TokenUsage], metrics_s: float,
                 jsonable: tuple[dict[str, Any], ErrorInfo | None]) -> tuple[TaskRecord, ErrorInfo | None]:
    """The item's :class:`TaskRecord`, its status rolled up (:func:`_roll_up`), and what made it fail, for its
    executor (``None`` for an ``ok`` record; see :attr:`ItemResult.error`).

    Args:
        item: the item (its repeat and position).
        task: the copy of the task the solution saw (its id and tags).
        outcome: how the solution ended (times, tries, the input taken before it ran).
        output: what the metrics scored (:func:`scored_output`).
        metrics: one record per metric.
        run_id, attempt, worker: the run, the attempt and the executing worker's identity.
        usage: tokens by model, the solution's and the metrics'.
        metrics_s: seconds the metrics took.
        jsonable: ``output`` as :func:`jsonable_output` gave it before the metrics ran (the payload, and the error
            of a field JSON cannot hold).
    """
    payload, serial_error = jsonable
    verdict = _roll_up(outcome, output, serial_error, metrics)
    return TaskRecord(
        run_id=run_id,
        task_id=task.id,
        repeat=item.repeat,
        task_index=item.index,
        attempt=attempt,
        tries=outcome.tries,
        try_errors=outcome.try_errors,
        status=verdict.status,  # type: ignore[arg-type]
        tags=dict(task.tags or {}),
        input=outcome.task_input if outcome.task_input is not None else jsonable_input(task.input),
        output=payload.get("output"),
        trajectory=payload.get("trajectory") or [],
        solution_meta=payload.get("meta"),
        metrics=metrics,
        error=verdict.error,
        started_at=outcome.started_at or utc_now(),
        finished_at=utc_now(),
        timings=Timings(solution_s=outcome.solution_s, metrics_s=metrics_s,
                        total_s=time.perf_counter() - outcome.t_start),
        usage=usage,
        worker=worker,
    ), verdict.cause


def acknowledgement(record: TaskRecord, cause: ErrorInfo | None, stored: bytes | None, seconds: float,
                    keep_stored: bool = False) -> ItemResult:
    """The :class:`ItemResult` of a record: its status, whether this write stored it (``stored``: the JSON it
    stored, else ``None``), the ``cause`` of a failure (from :func:`build_record`), and its usable scores; with
    ``keep_stored``, the JSON too."""
    # A corpus metric's per-item value is no sample of its aggregate: no running mean of it.
    scores = usable_scores((m.name, m.result) for m in record.metrics
                           if m.error is None and m.type is not MetricType.CORPUS)
    return ItemResult(record.task_id, record.repeat, record.status, stored is not None, record.attempt, seconds,
                      cause, scores, record.tags.get("category"), stored if keep_stored else None)


_SERIAL_ERRORS = (PydanticSerializationError, TypeError, ValueError)
REPR_CHARS = 2000
"""Characters kept of the ``repr`` of an object a solution returned that JSON cannot hold."""


def jsonable_output(output: SolutionOutput) -> tuple[dict[str, Any], ErrorInfo | None]:
    """The output fields (``output``, ``trajectory``, ``meta``) as JSON-ready values, and an error naming the first
    that is not JSON-serialisable (``None`` when all are).

    Text and integers a store cannot take as they are (half of a surrogate pair, in a dictionary key too; an
    integer of more than 4,300 digits) are made storable (:func:`runner.core.storable.storable`) and are no error.
    A field that holds an object JSON cannot hold (an instance of an arbitrary class) keeps its structure, each such
    object as its ``repr`` (cut at :data:`REPR_CHARS` characters); should even that fail (a reference cycle),
    the whole field is its ``repr``, in the shape the record takes (``trajectory`` a list of it, ``meta`` an object
    ``{"repr": ...}``). So nothing the solution returned stops the record from being written.
    """
    payload: dict[str, Any] = {}
    error: ErrorInfo | None = None
    for name in ("output", "trajectory", "meta"):
        value = getattr(output, name)
        try:
            payload[name] = to_jsonable_python(value, fallback=None, serialize_unknown=False)
            continue
        except _SERIAL_ERRORS:
            pass
        try:  # a dictionary key UTF-8 cannot encode fails above; made storable, it is no error
            payload[name] = to_jsonable_python(storable(value), fallback=None, serialize_unknown=False)
            continue
        except _SERIAL_ERRORS as exc:
            error = error or ErrorInfo(
                type="UnserialisableOutput",
                message=f"the solution's {name} is not JSON-serialisable ({type(value).__name__}): {exc}",
            )
        try:
            payload[name] = to_jsonable_python(storable(value), fallback=cut_repr)
        except _SERIAL_ERRORS:
            whole = cut_repr(value)
            payload[name] = [whole] if name == "trajectory" else {"repr": whole} if name == "meta" else whole
    return payload, error


def cut_repr(value: Any) -> str:
    """``repr(value)`` cut at :data:`REPR_CHARS`; never raises (a ``__repr__`` that raises, or one that recurses
    past the limit, gives a line saying so)."""
    try:
        return repr(value)[:REPR_CHARS]
    except Exception as exc:  # noqa: BLE001 - the record must be written whatever the object does
        return f"<{type(value).__name__} object; its repr raised {type(exc).__name__}>"


def jsonable_input(value: Any) -> Any:
    """The task's input as JSON-ready values, for the record (an object JSON cannot hold becomes its ``repr``; text
    and integers made storable, :func:`runner.core.storable.storable`)."""
    try:
        return to_jsonable_python(storable(value), fallback=cut_repr)
    except _SERIAL_ERRORS:
        return cut_repr(value)
