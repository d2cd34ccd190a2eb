"""``execute_one``: the one path every work item takes, in ``--sequential`` and on every Ray actor alike.

Fresh task copy -> solution (sync or async, with a timeout) -> every metric once, each under its time limit
(:mod:`~runner.engine.item.scoring`) -> the roll-up of one status and one record (:mod:`~runner.engine.item.build_record`),
written once. Both executors enter here, and only here (the steps, ``_run_item``, ``_solve``, ``_score`` and
``_store``, are this module's own), so a bug seen on the cluster reproduces with ``--sequential``. The one other way
to a record is :func:`record_fault`, by which an executor records an item that did not finish where it ran (no
solution runs there). Solutions and metrics are called through :func:`runner.engine.item.guard.guarded`, so nothing
they raise, ``SystemExit`` included, leaves the item; each phase is reported to :mod:`runner.engine.item.watchdog`,
which sees an item that blocks the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import structlog

from runner.core.record import ErrorInfo, TaskRecord, TokenUsage
from runner.core.solution import SolutionContext
from runner.core.task import Task
from runner.core.usage import usage_scope
from runner.engine.run_context import RunContext
from runner.engine.item import watchdog
from runner.engine.item.guard import guarded
from runner.engine.item.outcome import SKIPPED, Fault, ItemResult, SolutionOutcome, error_info, worker_identity
from runner.engine.item.build_record import acknowledgement, build_record, jsonable_input, jsonable_output, \
    scored_output
from runner.engine.item.scoring import NotScored, score
from runner.engine.item.call_solution import Solution
from runner.engine.plan import WorkItem
from runner.storage.manifest import utc_now
from runner.traffic.control import TrafficControl

__all__ = ["Fault", "ItemResult", "ItemSite", "PendingWrite", "SKIPPED", "execute_one", "record_fault",
           "worker_identity"]


@dataclass(frozen=True)
class ItemSite:
    """Where an executor runs its items, and how: everything :func:`execute_one` needs besides the item.

    Args:
        context: the run (its store, run id and settings: ``timeout``, seconds the solution may take, past which the
            record is a ``timeout`` record; ``solution_retries``, extra tries on a fresh copy when it raises).
        solution: the solution, built once by the executor.
        traffic: this process's model traffic (the run's limiter, budget and response cache).
        worker: identity of the executing worker (host, pid, Ray node and actor ids), stored in each record.
        slots: a semaphore held while the solution runs (not while metrics run or the record is written), so an
            executor can bound the solution calls in flight and still overlap the storage writes of finished items;
            ``None``: no bound.
        sync_in_thread: run a sync solution (and sync metrics) in a daemon thread (needed for a timeout or
            concurrency); when ``False`` and there is no time limit, they run directly in the event loop (a
            debugger's breakpoint works as usual).
    """

    context: RunContext
    solution: Solution
    traffic: TrafficControl
    worker: dict[str, Any] = field(default_factory=worker_identity)
    slots: asyncio.Semaphore | None = None
    sync_in_thread: bool = True


class _NotStarted(BaseException):
    """Raised where an item gets its solution slot once the budget is reached; a ``BaseException`` so that the
    handlers that turn a solution's exceptions into its record let it through."""


@overload
async def execute_one(item: WorkItem, site: ItemSite, *, attempt: int = 1, owned: bool = False,
                      write_behind: Literal[False] = False) -> ItemResult: ...


@overload
async def execute_one(item: WorkItem, site: ItemSite, *, attempt: int = 1, owned: bool = False,
                      write_behind: Literal[True]) -> ItemResult | PendingWrite: ...


async def execute_one(item: WorkItem, site: ItemSite, *, attempt: int = 1, owned: bool = False,
                      write_behind: bool = False) -> ItemResult | PendingWrite:
    """Run one (task, repeat) and store its record: the solution (with its retries), every metric once, the
    record built and written once. The one entry of an item's path, for every executor.

    Args:
        item: the task (the solution and metrics see a deep copy, :meth:`Task.fresh`, never ``item.task``), the
            0-based repeat and the task's 0-based position in the benchmark (kept in the record).
        site: where and how it runs (:class:`ItemSite`).
        attempt: which execution of this item this is (counted by the executor across dead workers).
        owned: the caller hands over ``item.task``, a private copy nothing else holds (a Ray worker's task was just
            deserialised for this item): without solution retries the one try uses it as is instead of a deep copy.
        write_behind: return as soon as the record is built, before it is written: a :class:`PendingWrite` that
            the caller writes itself (:meth:`PendingWrite.write`), on its own event loop, while its next item runs
            (the sequential executor, whose items may run on a loop that a blocked item is abandoned with).

    The model calls of the item (the solution's and the metrics') go through the run's limiter and response cache
    (:meth:`TrafficControl.scope <runner.traffic.control.TrafficControl.scope>`); once the run's budget is reached,
    an item that has not got its solution slot yet does not start.

    Returns:
        an :class:`ItemResult`; solution and metric failures are inside the record, never raised. Its status is
        :data:`SKIPPED` for an item the budget kept from starting (nothing to write, with ``write_behind`` too).
        With ``write_behind``, any other item is a :class:`PendingWrite`.

    Raises:
        StorageError: the record cannot be written (the item is then not done and may be retried).
        StorageOutage: the store stayed unavailable past ``context.settings.storage_outage``; while it is
            unavailable, the item waits before its solution runs.
    """
    with structlog.contextvars.bound_contextvars(task_id=item.task.id, repeat=item.repeat, attempt=attempt), \
            watchdog.tracked(item.task.id, item.repeat, attempt, item.cell):
        built = await _run_item(item, site, attempt, owned)
        if isinstance(built, ItemResult) or write_behind:
            return built
        # Still tracked: an item its executor gave up on meanwhile (it blocked its loop) writes nothing.
        return await _store(built)


@dataclass(frozen=True)
class PendingWrite:
    """An item whose record is built and not yet written: what :func:`execute_one` returns with ``write_behind``.

    Args:
        record: the record.
        cause: what made the item fail, without a traceback (``None`` for an ``ok`` item): the solution's error,
            else the first failing metric's, else the record's own (as :attr:`ItemResult.error`).
        seconds: wall time of the item from its first solution slot.
        context: the run whose store takes the record.
    """

    record: TaskRecord
    cause: ErrorInfo | None
    seconds: float
    context: RunContext = field(repr=False)

    @property
    def status(self) -> str:
        """The record's status: ``ok``, ``error`` or ``timeout``."""
        return self.record.status

    async def write(self) -> ItemResult:
        """Write the record once and log it: the item's :class:`ItemResult`, carrying the JSON stored
        (:attr:`ItemResult.stored`: the driver that writes a record hands it to the shard compactor). A record
        another write had stored already is kept, and the result says ``written=False``.

        Raises:
            StorageError: the record cannot be written.
        """
        return await _store(self, keep_stored=True)


async def _run_item(item: WorkItem, site: ItemSite, attempt: int, owned: bool) -> PendingWrite | ItemResult:
    """The part of :func:`execute_one` that runs user code, inside the item's tracking by the watchdog: the
    solution (with its retries), then every metric once; the record built, not written. The :data:`SKIPPED`
    :class:`ItemResult` of an item the budget kept from starting.

    Raises:
        StorageOutage: as :func:`execute_one` (the item waits while the store is out, before its solution runs).
    """
    task = item.task
    await site.context.store.outage.wait()
    usage: dict[str, TokenUsage] = {}
    # The item's one CallScope: limiter, cache, repeat, usage, and what its models' weights are.
    with site.traffic.scope(item.repeat, usage=usage, weights=site.context.weights):
        # Taken before the solution runs: an owned task is not copied, and a solution may change its input.
        given_input = jsonable_input(task.input)
        try:
            fresh, outcome = await _solve(item, site, attempt, owned)
        except _NotStarted:
            return ItemResult(task.id, item.repeat, SKIPPED, False, attempt, 0.0)
        outcome.task_input = given_input
        try:
            return await _score(item, fresh, outcome, site.context, attempt=attempt, worker=site.worker,
                                usage=usage, sync_in_thread=site.sync_in_thread)
        finally:
            site.traffic.flush()


async def _solve(item: WorkItem, site: ItemSite, attempt: int, owned: bool) -> tuple[Task, SolutionOutcome]:
    """The solution part of :func:`execute_one`, tried up to ``1 + solution_retries`` times: the task copy the
    last try used (the metrics score that one) and how it ended."""
    task, settings = item.task, site.context.settings
    timeout, retries = settings.solution_limit, settings.solution_retries
    log = structlog.get_logger("runner")
    # A sync solution goes to a thread that a given limit can leave behind; under the default limit alone it runs
    # where the executor said (in the loop when sequential: a debugger's breakpoint works; a worker's watchdog sees
    # a loop it blocks), and the default bounds what awaits.
    in_thread = site.sync_in_thread or (timeout is not None and settings.limits_given)
    # The clock starts when the item gets its first solution slot: time queued behind other items is not its own.
    outcome = SolutionOutcome(started_at="")
    for extra_try in range(retries + 1):
        # An owned task may be used as is when there is one try only: a retry needs the task as it was.
        fresh = task if owned and retries == 0 else task.fresh()
        solution_context = SolutionContext(run_id=site.context.run_id, task_id=task.id, repeat=item.repeat,
                                           attempt=attempt, worker=site.worker, logger=log)
        status, error, output = "ok", None, None
        try:
            async with site.slots or contextlib.nullcontext():
                if not outcome.started_at:
                    if not site.traffic.may_start():
                        raise _NotStarted
                    outcome.started_at, outcome.t_start = utc_now(), time.perf_counter()
                t_solution = time.perf_counter()
                watchdog.phase("solution", timeout)
                output = await guarded(site.solution(fresh, solution_context, in_thread=in_thread), timeout)
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


async def _finish(item: WorkItem, task: Task, outcome: SolutionOutcome, context: RunContext, *, attempt: int,
                  worker: dict[str, Any]) -> ItemResult:
    """Score ``outcome`` with every metric of ``task`` once and write the item's record once (:func:`_score`, then
    :func:`_store`): the record of an item that did not finish on its worker (:func:`record_fault`).

    Raises:
        StorageError: the record cannot be written.
    """
    return await _store(await _score(item, task, outcome, context, attempt=attempt, worker=worker))


async def _score(
    item: WorkItem,
    task: Task,
    outcome: SolutionOutcome,
    context: RunContext,
    *,
    attempt: int = 1,
    worker: dict[str, Any] | None = None,
    usage: dict[str, TokenUsage] | None = None,
    sync_in_thread: bool = True,
) -> PendingWrite:
    """Score ``outcome`` with every metric of ``task`` once and build the item's record (not written yet).

    A solution that did not return is scored as ``SolutionOutput(success=False)``
    (:func:`~runner.engine.item.build_record.scored_output`). Each metric may take ``context.settings.metric_limit``
    seconds (the ``metric_timeout`` setting, else ``timeout``); past it, the metric's result is a ``TimeoutError``
    and the item's record a ``timeout``.

    Args:
        item: the item.
        task: the copy of ``item.task`` the solution saw (its metrics may read state the solution changed).
        outcome: how the solution ended.
        context: the run.
        attempt, worker: the attempt and the executing worker's identity.
        usage: tokens spent by the solution, by model (metrics' tokens are added to it).
        sync_in_thread: call a sync metric in a daemon thread (always when a metric time limit is set, so the limit
            can leave it behind).
    """
    usage = usage if usage is not None else {}
    output = scored_output(outcome)
    jsonable = jsonable_output(output)
    t_metrics = time.perf_counter()
    limit = context.settings.metric_limit
    with usage_scope(usage):
        in_thread = sync_in_thread or (limit is not None and context.settings.limits_given)
        metrics = await score(task.metrics, output, limit, in_thread)
    watchdog.phase("writing")
    record, cause = build_record(item, task, outcome, output, metrics, run_id=context.run_id, attempt=attempt,
                                 worker=worker or {}, usage=usage, metrics_s=time.perf_counter() - t_metrics,
                                 jsonable=jsonable)
    return PendingWrite(record, cause, time.perf_counter() - outcome.t_start, context)


async def _store(built: PendingWrite, *, keep_stored: bool = False) -> ItemResult:
    """Write a built item's record once (unless its executor gave up on it meanwhile) and log it; the item's
    :class:`ItemResult`. A record another write had stored already is kept, and the result says ``written=False``.
    With ``keep_stored`` (the driver writes it itself), the result carries the JSON stored
    (:attr:`ItemResult.stored`).

    Raises:
        StorageError: the record cannot be written.
    """
    record, seconds = built.record, built.seconds
    log = structlog.get_logger("runner")
    if watchdog.abandoned():
        # Its executor gave up on it (it blocked its loop past its limit) and stores its record; nobody reads this.
        log.info("item.abandoned", detail="it ended after its executor had recorded it; its result is dropped")
        return ItemResult(record.task_id, record.repeat, record.status, False, record.attempt, seconds)
    stored = await asyncio.to_thread(built.context.store.store_record, record)
    _log_written(log, record, stored is not None, seconds)
    return acknowledgement(record, built.cause, stored, seconds, keep_stored)


def _log_written(log: Any, record: TaskRecord, written: bool, seconds: float) -> None:
    """One line for a finished item: its status, and whether another write's record was there already."""
    if record.status == "ok":
        log.debug("item.done", status=record.status, seconds=round(seconds, 4))
        if written:
            return
    else:
        log.warning("item.done", task_id=record.task_id, repeat=record.repeat, attempt=record.attempt,
                    status=record.status, error=record.error.message if record.error else None,
                    seconds=round(seconds, 4))
    if not written and record.attempt == 1:
        # The plan skips items that had a record when it started and duplicate task ids, so a first attempt finds
        # another write's record only when another process writes to the same run.
        log.warning("item.duplicate", detail=f"task id {record.task_id!r} repeat {record.repeat} already had a "
                    "record of another writer, kept; a process writes to this storage without holding the run's lease")
    elif not written:
        log.info("item.exists", detail="a record of this item already existed; it was kept")


async def record_fault(item: WorkItem, attempt: int, fault: Fault, context: RunContext) -> str:
    """Store the record of an item that did not finish where it ran, written by its executor (the item's worker
    died past ``--max-attempts``, it blocked its event loop, its worker overran the memory limit), unless the item
    has a record already (its worker may have written it first); the status of the item's stored record.

    Not a second path for an item: no solution runs here. The executor calls it where :func:`execute_one` could not
    end (the Ray driver, for a worker's fault; the sequential executor, for an item that blocked its loop).

    Args:
        item: the item, as the executor sent it.
        attempt: the attempt recorded.
        fault: why (the record's status, error type and message), and the worker it happened on (``None``: the
            driver's own identity is recorded).
        context: the run.

    Its metrics are scored on the empty output, as for any failed item, on an event loop of their own (sync ones in
    threads, each under the metric time limit), so that a metric that hangs or blocks its loop cannot hold the
    executor: one that blocks it leaves every metric of the record unscored (an error naming why).

    Raises:
        StorageError: the record cannot be written.
    """
    # The outcome's clock starts when the executor gives the item up, before the store is asked about it.
    outcome = SolutionOutcome.failed(ErrorInfo(type=fault.error_type, message=fault.message), fault.status)
    existing = await asyncio.to_thread(context.store.record_status, item.task.id, item.repeat)
    if existing is not None:
        return existing
    task = item.task.fresh()
    worker = fault.worker or worker_identity(role="driver")

    async def score() -> ItemResult:
        with watchdog.tracked(item.task.id, item.repeat, attempt, item.cell):
            return await _finish(item, task, outcome, context, attempt=attempt, worker=worker)

    scoring = watchdog.ItemLoop()
    with structlog.contextvars.bound_contextvars(task_id=item.task.id, repeat=item.repeat, attempt=attempt):
        try:
            answer = await scoring.run(score())
        finally:
            scoring.close()
        if isinstance(answer, watchdog.Alarm):
            # A metric blocked the scoring loop too: record the item with its metrics unscored.
            task.metrics = [NotScored(metric, answer.message) for metric in task.metrics]
            answer = await _finish(item, task, outcome, context, attempt=attempt, worker=worker)
    if answer.written:
        return answer.status
    stored = await asyncio.to_thread(context.store.record_status, item.task.id, item.repeat)
    return stored or answer.status
