"""Progress of a run: a bar on a terminal, structlog ``run.progress`` events elsewhere.

Both executors feed it the small acknowledgements of finished items; it never sees records. It hands each one to
a :class:`~runner.engine.watch.ProtocolWatch`, which stops a run whose model server speaks another protocol.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import structlog

from runner.core.record import ErrorInfo
from runner.engine.watch import ProtocolWatch

_EVENT_INTERVAL_S = 10.0


class Progress:
    """Count finished items and report them.

    Args:
        total: items expected, or ``None`` if unknown.
        bar: draw a rich progress bar (on a terminal); otherwise emit a ``run.progress`` event at most every
            ``interval`` seconds, with ``done``, ``total``, ``errors``, ``rate`` (items/s) and ``eta_s``.
        interval: seconds between progress events.
        details: more fields for each progress event (the run's model traffic: rates, 429s, pauses, spend).
    """

    def __init__(self, total: int | None, bar: bool | None = None, interval: float = _EVENT_INTERVAL_S,
                 details: Callable[[], dict[str, Any]] | None = None) -> None:
        self.total = total
        self.details = details
        self.done = 0
        self.skipped = 0
        self.errors = 0
        self.duplicates = 0
        self.started = time.monotonic()
        self._first_done: float | None = None
        self.interval = interval
        self._last_event = self.started
        self._log = structlog.get_logger("runner")
        self.watch = ProtocolWatch()
        self._bar: Any = None
        self._bar_task: Any = None
        if bar if bar is not None else sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn
            from rich.progress import TimeElapsedColumn, TimeRemainingColumn

            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("errors {task.fields[errors]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                redirect_stderr=True,
                transient=False,
            )
            self._bar_task = self._bar.add_task("items", total=total, errors=0)
            self._bar.start()

    def advance(self, status: str, duplicate: bool = False, error: ErrorInfo | None = None) -> None:
        """Count one finished item with its record status; ``duplicate``: its first attempt found its record
        already written (see :attr:`ItemResult.duplicate <runner.engine.execute.ItemResult.duplicate>`); ``error``:
        what ended it (:attr:`ItemResult.error <runner.engine.execute.ItemResult.error>`). An item
        the budget kept from starting (status ``skipped``) is counted in :attr:`skipped`, not as done.

        Raises:
            ProtocolStop: the model server keeps speaking another protocol (:class:`ProtocolWatch`); the item is
                counted first.
        """
        if status == "skipped":
            self.skipped += 1
            return
        self.done += 1
        self.duplicates += duplicate
        if self._first_done is None:
            self._first_done = time.monotonic()
        if status != "ok":
            self.errors += 1
        if self._bar is not None:
            self._bar.update(self._bar_task, advance=1, errors=self.errors)
        elif time.monotonic() - self._last_event >= self.interval:
            self._last_event = time.monotonic()
            self._log.info("run.progress", **self.snapshot(), **(self.details() if self.details else {}))
        self.watch.observe(status, error)

    def snapshot(self) -> dict[str, Any]:
        """``done``, ``total``, ``errors``, ``rate`` (items/s) and ``eta_s`` (seconds, or ``None``).

        The rate counts from the first finished item, so start-up time (a Ray cluster, model loading) does not
        make the first estimates absurd.
        """
        rate = None
        if self._first_done is not None and self.done > 1:
            rate = (self.done - 1) / max(time.monotonic() - self._first_done, 1e-9)
        eta = (self.total - self.done) / rate if self.total is not None and rate else None
        return {
            "done": self.done,
            "total": self.total,
            "errors": self.errors,
            "rate": round(rate, 2) if rate is not None else None,
            "eta_s": round(eta, 1) if eta is not None else None,
        }

    def close(self) -> None:
        """Stop the bar."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
