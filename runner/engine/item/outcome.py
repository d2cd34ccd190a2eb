"""What one work item's run comes to: how its solution ended (:class:`SolutionOutcome`), the small
acknowledgement an executor gets back (:class:`ItemResult`), and why an executor records an item itself
(:class:`Fault`)."""

from __future__ import annotations

import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from runner.core.metric import MetricError
from runner.core.record import ErrorInfo
from runner.core.solution import SolutionOutput
from runner.engine.item.guard import Escaped
from runner.storage.manifest import utc_now

SKIPPED = "skipped"
"""The :attr:`ItemResult.status` of an item that did not start because the run's budget was reached."""


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
        stored: the record's JSON exactly as this process stored it, only where the driver wrote the record itself
            (the sequential executor, :func:`~runner.engine.item.execute.record_fault`): the result shards'
            compactor then need not read it back. Never sent between processes.
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
    stored: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def duplicate(self) -> bool:
        """A first attempt whose record another writer had stored: a process writing to this run without its
        lease (the plan leaves duplicate task ids out, so they never get here)."""
        return not self.written and self.attempt == 1 and self.status != SKIPPED


@dataclass(frozen=True)
class Fault:
    """Why an item is recorded by its executor rather than on its own path (its worker died, it blocked its event
    loop, its worker overran the memory limit).

    Args:
        status: the record's status (``error`` or ``timeout``).
        error_type: the record's error type (``WorkerDied``, ``EventLoopBlocked``, ``MemoryLimitExceeded``).
        message: one line.
        worker: the identity of the worker it happened on (``None``: the driver's own is recorded).
    """

    status: str
    error_type: str
    message: str
    worker: dict[str, Any] | None = None


def worker_identity(**extra: Any) -> dict[str, Any]:
    """Host name and process id of this process, plus ``extra`` (Ray node and actor ids)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), **extra}


def error_info(exc: BaseException, with_traceback: bool = True) -> ErrorInfo:
    """An exception as an :class:`ErrorInfo` (an :class:`~runner.engine.item.guard.Escaped` as the exception it carries,
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
