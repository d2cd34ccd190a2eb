"""``execute_one``: the one path every work item takes, in ``--sequential`` and on every Ray actor alike.

Fresh task copy -> solution (sync or async, with a timeout) -> every metric once -> one record, written once.
A bug seen on the cluster therefore reproduces with ``--sequential``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import socket
import time
import traceback
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic_core import PydanticSerializationError, to_jsonable_python

from runner.core.metric import MetricBase, MetricResult, MetricType
from runner.core.record import ErrorInfo, MetricRecord, TaskRecord, Timings
from runner.core.solution import SolutionContext, SolutionOutput
from runner.core.task import Task
from runner.core.usage import usage_scope
from runner.engine.solution import Solution
from runner.storage.manifest import utc_now
from runner.storage.store import ResultStore


@dataclass(frozen=True)
class ItemResult:
    """The small acknowledgement an executor gets back for one item (never the record itself).

    Args:
        task_id, repeat: the item.
        status: the record's status (``ok``, ``error``, ``timeout``).
        written: ``False`` when a record already existed (another attempt won, or, at ``attempt`` 1, the task id is
            a duplicate: see :attr:`duplicate`), so nothing was written.
        attempt: the attempt that produced the record.
        seconds: wall time of the item.
    """

    task_id: str
    repeat: int
    status: str
    written: bool
    attempt: int
    seconds: float

    @property
    def duplicate(self) -> bool:
        """A first attempt whose record existed already: a duplicate task id, or another driver on this run."""
        return not self.written and self.attempt == 1


def worker_identity(**extra: Any) -> dict[str, Any]:
    """Host name and process id of this process, plus ``extra`` (Ray node and actor ids)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), **extra}


def stored_status(store: ResultStore, task_id: str, repeat: int) -> str | None:
    """The status of the stored record of (``task_id``, ``repeat``), or ``None`` if it has none.

    Used before running an item again after its worker died: the dead worker may have stored it already.
    """
    try:
        data = store.fs.cat_file(store.record_path(task_id, repeat))
    except FileNotFoundError:
        return None
    return TaskRecord.model_validate_json(data).status


def error_info(exc: BaseException, with_traceback: bool = True) -> ErrorInfo:
    """An exception as an :class:`ErrorInfo`."""
    message = str(exc) or type(exc).__name__
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) if with_traceback else None
    return ErrorInfo(type=type(exc).__name__, message=message, traceback=trace)


async def execute_one(
    task: Task,
    repeat: int,
    solution: Solution,
    store: ResultStore,
    *,
    run_id: str,
    task_index: int | None = None,
    timeout: float | None = None,
    attempt: int = 1,
    retry_errors: int = 0,
    worker: dict[str, Any] | None = None,
    sync_in_thread: bool = True,
    slots: asyncio.Semaphore | None = None,
    owned: bool = False,
) -> ItemResult:
    """Run one (task, repeat) and store its record.

    Args:
        task: the task; the solution and metrics see a deep copy (:meth:`Task.fresh`), never this object.
        repeat: 0-based repeat index.
        solution: the adapted solution.
        store: where the record goes.
        run_id: the run's id.
        task_index: the task's 0-based position in the benchmark (:attr:`WorkItem.index`), kept in the record.
        timeout: seconds the solution may take; past it the record is a ``timeout`` record. ``None``: no limit.
        attempt: which execution of this item this is (counted by the executor across dead workers).
        retry_errors: extra tries, each on a fresh copy, when the solution raises (0: an exception is an error
            record at once).
        worker: identity of the executing worker, stored in the record.
        sync_in_thread: run a sync solution in a daemon thread (needed for a timeout or concurrency); when
            ``False`` and there is no timeout, it runs directly in the event loop.
        owned: the caller hands over ``task``, a private copy nothing else holds (a Ray worker's task was just
            deserialised for this item): without ``retry_errors`` the one try uses it as is instead of a deep copy.
        slots: a semaphore held while the solution runs (not while metrics run or the record is written), so an
            executor can bound the solution calls in flight and still overlap the storage writes of finished items.

    Returns:
        an :class:`ItemResult`; solution and metric failures are inside the record, never raised.

    Raises:
        StorageError: the record cannot be written (the item is then not done and may be retried).
    """
    with structlog.contextvars.bound_contextvars(task_id=task.id, repeat=repeat, attempt=attempt):
        return await _execute_one(
            task, repeat, task_index, solution, store, run_id, timeout, attempt, retry_errors, worker, sync_in_thread,
            slots, owned,
        )


async def _execute_one(
    task: Task,
    repeat: int,
    task_index: int | None,
    solution: Solution,
    store: ResultStore,
    run_id: str,
    timeout: float | None,
    attempt: int,
    retry_errors: int,
    worker: dict[str, Any] | None,
    sync_in_thread: bool,
    slots: asyncio.Semaphore | None,
    owned: bool,
) -> ItemResult:
    # The clock starts when the item gets its first solution slot: time queued behind other items is not its own.
    started_at, t_start = "", 0.0
    log = structlog.get_logger("runner")
    in_thread = sync_in_thread or timeout is not None
    # Taken before the solution runs: an owned task is not copied, and a solution may change its input.
    given_input = _jsonable_input(task.input)

    with usage_scope() as usage:
        for extra_try in range(retry_errors + 1):
            # An owned task may be used as is when there is one try only: a retry needs the task as it was.
            fresh = task if owned and retry_errors == 0 else task.fresh()
            context = SolutionContext(
                run_id=run_id, task_id=task.id, repeat=repeat, attempt=attempt, worker=worker or {}, logger=log
            )
            status, error, output = "ok", None, None
            try:
                async with slots or contextlib.nullcontext():
                    if not started_at:
                        started_at, t_start = utc_now(), time.perf_counter()
                    t_solution = time.perf_counter()
                    output = await asyncio.wait_for(solution(fresh, context, in_thread=in_thread), timeout)
            except asyncio.TimeoutError:
                status = "timeout"
                error = ErrorInfo(type="TimeoutError", message=f"solution ran past the {timeout:g} s timeout")
            except Exception as exc:  # noqa: BLE001 - a failing solution is an error record, not a crash
                status, error = "error", error_info(exc)
            solution_s = time.perf_counter() - t_solution
            if status != "error" or extra_try == retry_errors:
                break
            log.warning("solution.retry", error=error.message if error else None, retries_left=retry_errors - extra_try)

        if output is None:
            output = SolutionOutput(success=False, output=None)
        payload, serial_error = _jsonable_output(output)
        if serial_error is not None and status == "ok":
            status, error = "error", serial_error
        if status == "ok" and not output.success:
            status = "error"
            error = ErrorInfo(type="SolutionFailed", message="the solution reported success=False")

        t_metrics = time.perf_counter()
        metric_records = [await _run_metric(metric, output) for metric in fresh.metrics]
        metrics_s = time.perf_counter() - t_metrics
        failed = [m for m in metric_records if m.error is not None]
        if failed and status == "ok":
            status = "error"
            error = ErrorInfo(
                type="MetricError",
                message="; ".join(f"metric {m.name!r}: {m.error.type}: {m.error.message}" for m in failed if m.error),
            )

    record = TaskRecord(
        run_id=run_id,
        task_id=task.id,
        repeat=repeat,
        task_index=task_index,
        attempt=attempt,
        status=status,  # type: ignore[arg-type]
        tags=dict(task.tags or {}),
        input=given_input,
        output=payload.get("output"),
        trajectory=payload.get("trajectory") or [],
        solution_meta=payload.get("meta"),
        metrics=metric_records,
        error=error,
        started_at=started_at,
        finished_at=utc_now(),
        timings=Timings(solution_s=solution_s, metrics_s=metrics_s, total_s=time.perf_counter() - t_start),
        usage=usage,
        worker=worker or {},
    )
    written = await asyncio.to_thread(store.write_record, record)
    seconds = time.perf_counter() - t_start
    if status == "ok":
        log.debug("item.done", status=status, seconds=round(seconds, 4))
    else:
        log.warning("item.done", status=status, error=error.message if error else None, seconds=round(seconds, 4))
    if not written and attempt == 1:
        # The plan skips items that had a record when it started, so a first attempt finds one only when the
        # benchmark yields this task id twice or another process writes to the same run.
        log.warning("item.duplicate", detail=f"task id {task.id!r} repeat {repeat} already had a record, kept; "
                    "duplicate task id in the benchmark, or another driver writing to this storage")
    elif not written:
        log.info("item.exists", detail="a record of this item already existed; it was kept")
    return ItemResult(task.id, repeat, status, written, attempt, seconds)


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


async def _run_metric(metric: MetricBase, output: SolutionOutput) -> MetricRecord:
    """Call ``metric`` once; any exception becomes the metric's error."""
    try:
        result = metric(output)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, MetricResult):
            result = MetricResult(name=metric.name, result=result)
        if metric.metric_type is MetricType.CATEGORY and metric.categories and result.result not in metric.categories:
            raise ValueError(f"result {result.result!r} is not one of the categories {metric.categories}")
        return MetricRecord(
            name=metric.name,
            type=metric.metric_type,
            result=result.result,
            message=result.message,
            metadata=to_jsonable_python(result.metadata, fallback=repr),
        )
    except Exception as exc:  # noqa: BLE001 - a failing metric is an error result, never a crash
        return MetricRecord(name=metric.name, type=metric.metric_type, error=error_info(exc))
