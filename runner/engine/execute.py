"""``execute_one``: the one path every work item takes, in ``--sequential`` and on every Ray actor alike.

Fresh task copy -> solution (sync or async, with a timeout) -> every metric once (each under its time limit) -> one
record, written once (:func:`finish_item`). A bug seen on the cluster therefore reproduces with ``--sequential``.
Solutions and metrics are called through :func:`runner.engine.guard.guarded`, so nothing they raise, ``SystemExit``
included, leaves the item; each phase is reported to :mod:`runner.engine.watchdog`, which sees an item that blocks
the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import decimal
import inspect
import numbers
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import structlog
from pydantic_core import PydanticSerializationError, to_jsonable_python

from runner.core.metric import MetricBase, MetricError, MetricResult, MetricType
from runner.core.record import ErrorInfo, MetricRecord, TaskRecord, Timings, TokenUsage
from runner.core.signature import is_async
from runner.core.solution import SolutionContext, SolutionOutput
from runner.core.task import Task
from runner.core.usage import usage_scope
from runner.engine import watchdog
from runner.engine.context import RunContext
from runner.engine.live import usable_scores
from runner.engine.guard import Escaped, guarded
from runner.engine.plan import WorkItem
from runner.engine.solution import Solution, in_daemon_thread
from runner.storage.manifest import utc_now


SKIPPED = "skipped"
"""The :attr:`ItemResult.status` of an item that did not start because the run's budget was reached."""


class _NotStarted(BaseException):
    """Raised where an item gets its solution slot once the budget is reached; a ``BaseException`` so that the
    handlers that turn a solution's exceptions into its record let it through."""


@dataclass(frozen=True)
class ItemResult:
    """The small acknowledgement an executor gets back for one item (never the record itself).

    Args:
        task_id, repeat: the item.
        status: the record's status (``ok``, ``error``, ``timeout``), or :data:`SKIPPED`: the run's budget was
            reached before the item could start, nothing was written.
        written: ``False`` when another write's record already existed (an earlier attempt's, or, at ``attempt``
            1, another writer's: see :attr:`duplicate`), so nothing was written. A write whose response was lost
            and whose stored record is its own counts as written (:meth:`ResultStore.write_record`).
        attempt: the attempt that produced the record.
        seconds: wall time of the item.
        error: what made the item an error, without its traceback (``None`` for an ``ok`` item): the solution's
            error, or else the first failing metric's (the record's own ``MetricError`` only sums those up). The
            driver reads its ``code`` (:mod:`runner.engine.watch` stops a run whose server fails every call alike).
        scores: the record's metric values a mean can use (:func:`runner.core.metric.number`), by metric name, for
            the driver's live statistics (:mod:`runner.engine.live`): small numbers, never the record.
        category: the task's ``tags["category"]``, for the live per-category means.
    """

    task_id: str
    repeat: int
    status: str
    written: bool
    attempt: int
    seconds: float
    error: ErrorInfo | None = None
    scores: dict[str, float] = field(default_factory=dict)
    category: str | None = None

    @property
    def duplicate(self) -> bool:
        """A first attempt whose record another writer had stored: a process writing to this run without its
        lease (the plan leaves duplicate task ids out, so they never get here)."""
        return not self.written and self.attempt == 1 and self.status != SKIPPED


def worker_identity(**extra: Any) -> dict[str, Any]:
    """Host name and process id of this process, plus ``extra`` (Ray node and actor ids)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), **extra}


def error_info(exc: BaseException, with_traceback: bool = True) -> ErrorInfo:
    """An exception as an :class:`ErrorInfo` (an :class:`~runner.engine.guard.Escaped` as the exception it carries,
    described); its ``code`` is a :class:`MetricError`'s code, or the ``error_code`` string an exception carries (a
    model error's: ``protocol_error``, ``quota_exhausted``, ``rate_limited``, read by that name so that the engine
    imports no model code; :mod:`runner.engine.watch` stops a run on them), else ``None``."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, Escaped):
        exc = exc.original
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) if with_traceback else None
    carried = getattr(exc, "error_code", None)
    code = exc.code if isinstance(exc, MetricError) else carried if isinstance(carried, str) else None
    return ErrorInfo(type=type(exc).__name__, message=message, traceback=trace, code=code)


@dataclass
class SolutionOutcome:
    """How the solution part of an item ended.

    Args:
        status: ``ok``, ``error`` or ``timeout``.
        output: what the solution returned (``None`` when it did not return).
        error: what went wrong, for ``error`` and ``timeout``.
        started_at: ISO-8601 UTC time the item got its first solution slot (``""``: it never ran).
        t_start: :func:`time.perf_counter` at that moment.
        solution_s: seconds of the last solution try.
        task_input: the task's input as JSON, taken before the solution ran (``None``: take it from the task).
        tries: solution tries made (1 plus the retries taken).
        try_errors: the errors of the tries before the last, oldest first, without tracebacks.
    """

    status: str = "ok"
    output: SolutionOutput | None = None
    error: ErrorInfo | None = None
    started_at: str = ""
    t_start: float = field(default_factory=time.perf_counter)
    solution_s: float = 0.0
    task_input: Any = None
    tries: int = 1
    try_errors: list[ErrorInfo] = field(default_factory=list)

    @classmethod
    def failed(cls, error: BaseException | ErrorInfo, status: str = "error") -> SolutionOutcome:
        """The outcome of an item whose solution never returned because of ``error`` (its worker died, it blocked
        its event loop, its worker overran the memory limit), recorded with ``status``."""
        info = error if isinstance(error, ErrorInfo) else error_info(error, with_traceback=False)
        return cls(status=status, error=info, started_at=utc_now())


async def execute_one(
    item: WorkItem,
    solution: Solution,
    context: RunContext,
    *,
    attempt: int = 1,
    worker: dict[str, Any] | None = None,
    slots: asyncio.Semaphore | None = None,
    sync_in_thread: bool = True,
    owned: bool = False,
) -> ItemResult:
    """Run one (task, repeat) and store its record.

    Args:
        item: the task (the solution and metrics see a deep copy, :meth:`Task.fresh`, never ``item.task``), the
            0-based repeat and the task's 0-based position in the benchmark (kept in the record).
        solution: the adapted solution.
        context: the run: its store, run id and settings (``timeout``: seconds the solution may take, past which
            the record is a ``timeout`` record; ``solution_retries``: extra tries, each on a fresh copy, when the
            solution raises).
        attempt: which execution of this item this is (counted by the executor across dead workers).
        worker: identity of the executing worker, stored in the record.
        slots: a semaphore held while the solution runs (not while metrics run or the record is written), so an
            executor can bound the solution calls in flight and still overlap the storage writes of finished items.
        sync_in_thread: run a sync solution in a daemon thread (needed for a timeout or concurrency); when
            ``False`` and there is no timeout, it runs directly in the event loop.
        owned: the caller hands over ``item.task``, a private copy nothing else holds (a Ray worker's task was just
            deserialised for this item): without solution retries the one try uses it as is instead of a deep copy.

    The model calls of the item (the solution's and the metrics') go through the run's limiter and response cache
    (:meth:`TrafficControl.scope <runner.engine.traffic.TrafficControl.scope>`); once the run's budget is reached,
    an item that has not got its solution slot yet does not start.

    Returns:
        an :class:`ItemResult`; solution and metric failures are inside the record, never raised. Its status is
        :data:`SKIPPED` for an item the budget kept from starting.

    Raises:
        StorageError: the record cannot be written (the item is then not done and may be retried).
        StorageOutage: the store stayed unavailable past ``context.settings.storage_outage``; while it is
            unavailable, the item waits before its solution runs.
    """
    task = item.task
    await context.store.outage.wait()
    with structlog.contextvars.bound_contextvars(task_id=task.id, repeat=item.repeat, attempt=attempt), \
            watchdog.tracked(task.id, item.repeat, attempt):
        with usage_scope() as usage, context.traffic.scope(item.repeat):
            # Taken before the solution runs: an owned task is not copied, and a solution may change its input.
            given_input = _jsonable_input(task.input)
            try:
                fresh, outcome = await _solve(item, solution, context, attempt, worker, slots, sync_in_thread, owned)
            except _NotStarted:
                return ItemResult(task.id, item.repeat, SKIPPED, False, attempt, 0.0)
            outcome.task_input = given_input
            try:
                return await finish_item(item, fresh, outcome, context, attempt=attempt, worker=worker, usage=usage,
                                         sync_in_thread=sync_in_thread)
            finally:
                context.traffic.flush()


async def _solve(
    item: WorkItem,
    solution: Solution,
    context: RunContext,
    attempt: int,
    worker: dict[str, Any] | None,
    slots: asyncio.Semaphore | None,
    sync_in_thread: bool,
    owned: bool,
) -> tuple[Task, SolutionOutcome]:
    """The solution part of :func:`execute_one`, tried up to ``1 + solution_retries`` times: the task copy the
    last try used (the metrics score that one) and how it ended."""
    task, timeout, retries = item.task, context.settings.timeout, context.settings.solution_retries
    log = structlog.get_logger("runner")
    in_thread = sync_in_thread or timeout is not None
    # The clock starts when the item gets its first solution slot: time queued behind other items is not its own.
    outcome = SolutionOutcome(started_at="")
    for extra_try in range(retries + 1):
        # An owned task may be used as is when there is one try only: a retry needs the task as it was.
        fresh = task if owned and retries == 0 else task.fresh()
        solution_context = SolutionContext(run_id=context.run_id, task_id=task.id, repeat=item.repeat,
                                           attempt=attempt, worker=worker or {}, logger=log)
        status, error, output = "ok", None, None
        try:
            async with slots or contextlib.nullcontext():
                if not outcome.started_at:
                    if not context.traffic.may_start():
                        raise _NotStarted
                    outcome.started_at, outcome.t_start = utc_now(), time.perf_counter()
                t_solution = time.perf_counter()
                watchdog.phase("solution", timeout)
                output = await guarded(solution(fresh, solution_context, in_thread=in_thread), timeout)
        except asyncio.TimeoutError:
            status = "timeout"
            error = ErrorInfo(type="TimeoutError", message=f"solution ran past the {timeout:g} s timeout")
        except Exception as exc:  # noqa: BLE001 - a failing solution is an error record, not a crash
            status, error = "error", error_info(exc)
        watchdog.phase("queued")
        outcome.status, outcome.error, outcome.output = status, error, output
        outcome.solution_s = time.perf_counter() - t_solution
        outcome.tries = extra_try + 1
        if status != "error" or extra_try == retries:
            break
        assert error is not None
        outcome.try_errors.append(error.model_copy(update={"traceback": None}))
        log.warning("solution.retry", error=error.message, retries_left=retries - extra_try)
    return fresh, outcome


async def finish_item(
    item: WorkItem,
    task: Task,
    outcome: SolutionOutcome,
    context: RunContext,
    *,
    attempt: int = 1,
    worker: dict[str, Any] | None = None,
    usage: dict[str, TokenUsage] | None = None,
    sync_in_thread: bool = True,
) -> ItemResult:
    """Score ``outcome`` with every metric of ``task`` once and write the item's record once.

    A solution that did not return is scored as ``SolutionOutput(success=False)``, so a failure counts against the
    score rather than vanishing from it. Each metric may take ``context.settings.metric_limit`` seconds (the
    ``metric_timeout`` setting, else ``timeout``); past it, the metric's result is a ``TimeoutError`` and the item's
    record a ``timeout``. Used by :func:`execute_one`, and by an executor to record an item that did not finish on
    its worker (:func:`record_fault`).

    Args:
        item: the item.
        task: the copy of ``item.task`` the solution saw (its metrics may read state the solution changed).
        outcome: how the solution ended.
        context, attempt, worker: as for :func:`execute_one`.
        usage: tokens spent by the solution, by model (metrics' tokens are added to it).
        sync_in_thread: call a sync metric in a daemon thread (always when a metric time limit is set, so the limit
            can leave it behind).

    Returns:
        the item's :class:`ItemResult`.

    Raises:
        StorageError: the record cannot be written.
    """
    log = structlog.get_logger("runner")
    usage = usage if usage is not None else {}
    status, error = outcome.status, outcome.error
    output = outcome.output if outcome.output is not None else SolutionOutput(success=False, output=None)
    payload, serial_error = _jsonable_output(output)
    if serial_error is not None and status == "ok":
        status, error = "error", serial_error
    if status == "ok" and not output.success:
        status = "error"
        error = ErrorInfo(type="SolutionFailed", message="the solution reported success=False")

    t_metrics = time.perf_counter()
    limit = context.settings.metric_limit
    in_thread = sync_in_thread or limit is not None
    with usage_scope(usage):
        metric_records = [await _run_metric(metric, output, limit, in_thread) for metric in task.metrics]
    watchdog.phase("writing")
    metrics_s = time.perf_counter() - t_metrics
    failed = [m for m in metric_records if m.error is not None]
    if failed and status == "ok":
        late = any(m.error is not None and m.error.type == "TimeoutError" for m in failed)
        status = "timeout" if late else "error"
        error = ErrorInfo(
            type="MetricTimeout" if late else "MetricError",
            message="; ".join(f"metric {m.name!r}: {m.error.type}: {m.error.message}" for m in failed if m.error),
        )

    started_at = outcome.started_at or utc_now()
    record = TaskRecord(
        run_id=context.run_id,
        task_id=task.id,
        repeat=item.repeat,
        task_index=item.index,
        attempt=attempt,
        tries=outcome.tries,
        try_errors=outcome.try_errors,
        status=status,  # type: ignore[arg-type]
        tags=dict(task.tags or {}),
        input=outcome.task_input if outcome.task_input is not None else _jsonable_input(task.input),
        output=payload.get("output"),
        trajectory=payload.get("trajectory") or [],
        solution_meta=payload.get("meta"),
        metrics=metric_records,
        error=error,
        started_at=started_at,
        finished_at=utc_now(),
        timings=Timings(solution_s=outcome.solution_s, metrics_s=metrics_s,
                        total_s=time.perf_counter() - outcome.t_start),
        usage=usage,
        worker=worker or {},
    )
    seconds = time.perf_counter() - outcome.t_start
    if watchdog.abandoned():
        # Its executor gave up on it (it blocked its loop past its limit) and stores its record; nobody reads this.
        log.info("item.abandoned", detail="it ended after its executor had recorded it; its result is dropped")
        return ItemResult(task.id, item.repeat, status, False, attempt, seconds)
    written = await asyncio.to_thread(context.store.write_record, record)
    if status == "ok":
        log.debug("item.done", status=status, seconds=round(seconds, 4))
    else:
        log.warning("item.done", status=status, error=error.message if error else None, seconds=round(seconds, 4))
    if not written and attempt == 1:
        # The plan skips items that had a record when it started and duplicate task ids, so a first attempt finds
        # another write's record only when another process writes to the same run.
        log.warning("item.duplicate", detail=f"task id {task.id!r} repeat {item.repeat} already had a record of "
                    "another writer, kept; a process writes to this storage without holding the run's lease")
    elif not written:
        log.info("item.exists", detail="a record of this item already existed; it was kept")
    cause = None
    if status != "ok":
        cause = outcome.error or next((m.error for m in failed), None) or error
    if cause is not None:
        cause = cause.model_copy(update={"traceback": None})
    scores = usable_scores((m.name, m.result) for m in metric_records if m.error is None)
    return ItemResult(task.id, item.repeat, status, written, attempt, seconds, cause, scores,
                      record.tags.get("category"))


async def record_fault(item: WorkItem, attempt: int, outcome: SolutionOutcome, context: RunContext,
                       worker: dict[str, Any]) -> str:
    """Store the record of an item that did not finish where it ran (``outcome``: see
    :meth:`SolutionOutcome.failed`), written by the executor, unless the item has a record already (its worker may
    have written it first); the status of the item's stored record.

    Its metrics are scored on the empty output, as for any failed item, on an event loop of their own (sync ones in
    threads, each under the metric time limit), so that a metric that hangs or blocks its loop cannot hold the
    executor: one that blocks it leaves every metric of the record unscored (an error naming why).

    Raises:
        StorageError: the record cannot be written.
    """
    existing = await asyncio.to_thread(context.store.record_status, item.task.id, item.repeat)
    if existing is not None:
        return existing
    task = item.task.fresh()

    async def score() -> ItemResult:
        with watchdog.tracked(item.task.id, item.repeat, attempt):
            return await finish_item(item, task, outcome, context, attempt=attempt, worker=worker)

    scoring = watchdog.ItemLoop()
    with structlog.contextvars.bound_contextvars(task_id=item.task.id, repeat=item.repeat, attempt=attempt):
        try:
            answer = await scoring.run(score())
        finally:
            scoring.close()
        if isinstance(answer, watchdog.Alarm):
            # A metric blocked the scoring loop too: record the item with its metrics unscored.
            task.metrics = [_NotScored(metric, answer.message) for metric in task.metrics]
            answer = await finish_item(item, task, outcome, context, attempt=attempt, worker=worker)
    if answer.written:
        return answer.status
    stored = await asyncio.to_thread(context.store.record_status, item.task.id, item.repeat)
    return stored or answer.status


class _NotScored(MetricBase):
    """Stands for a metric that could not score an item's record (it blocked its event loop); raises."""

    def __init__(self, metric: MetricBase, reason: str) -> None:
        super().__init__(name=metric.name, metric_type=metric.metric_type, categories=metric.categories)
        self.reason = reason

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        raise RuntimeError(f"not scored: {self.reason}")


def _jsonable_output(output: SolutionOutput) -> tuple[dict[str, Any], ErrorInfo | None]:
    """The output fields as JSON-ready values, or an error naming what could not be serialised."""
    payload: dict[str, Any] = {}
    for name in ("output", "trajectory", "meta"):
        value = getattr(output, name)
        try:
            payload[name] = to_jsonable_python(value, fallback=None, serialize_unknown=False)
        except (PydanticSerializationError, TypeError, ValueError) as exc:
            payload[name] = repr(value)[:2000]
            return payload, ErrorInfo(
                type="UnserialisableOutput",
                message=f"the solution's {name} is not JSON-serialisable ({type(value).__name__}): {exc}",
            )
    return payload, None


def _jsonable_input(value: Any) -> Any:
    """The task's input as JSON-ready values, for the record (an object JSON cannot hold becomes its ``repr``)."""
    try:
        return to_jsonable_python(value, fallback=repr)
    except (PydanticSerializationError, TypeError, ValueError):
        return repr(value)[:2000]


async def _call_metric(metric: MetricBase, output: SolutionOutput, in_thread: bool) -> Any:
    """``metric(output)``, awaited; a sync metric in a daemon thread when ``in_thread``."""
    result = await in_daemon_thread(metric, output) if in_thread and not is_async(metric) else metric(output)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _run_metric(metric: MetricBase, output: SolutionOutput, limit: float | None,
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
        result = plain_result(result)
        if metric.metric_type is MetricType.CATEGORY and metric.categories and result not in metric.categories:
            raise ValueError(f"result {result!r} is not one of the categories {metric.categories}")
        return MetricRecord(
            name=metric.name,
            type=metric.metric_type,
            result=result,
            message=message,
            metadata=to_jsonable_python(metadata, fallback=repr),
            allows_infinite=allows_infinite,
        )
    except asyncio.TimeoutError:
        late = ErrorInfo(type="TimeoutError", message=f"ran past its {limit:g} s limit (--metric-timeout)")
        return MetricRecord(name=metric.name, type=metric.metric_type, error=late)
    except Exception as exc:  # noqa: BLE001 - a failing metric is an error result, never a crash
        metadata = to_jsonable_python(exc.metadata, fallback=repr) if isinstance(exc, MetricError) else None
        return MetricRecord(name=metric.name, type=metric.metric_type, error=error_info(exc), metadata=metadata,
                            allows_infinite=allows_infinite)


def plain_result(value: Any) -> bool | int | float | str | None:
    """A metric's result as a plain Python value: a numpy scalar (or any 0-d array) by its ``item()``, an
    integral number as ``int``, another real number or a ``Decimal`` as ``float`` (``Decimal("NaN")`` is NaN).

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
        return float(value)
    raise TypeError(f"result {value!r} is a {type(value).__name__}; a metric's result is a number, a boolean, a "
                    "label (str) or None")
