"""Progress of a run: a bar on a terminal, structlog ``run.progress`` events elsewhere, and a heartbeat.

Both executors feed it the small acknowledgements of finished items (it never sees records) and say when each item
went out (:meth:`Progress.sent`), so it knows what is in flight and since when. While a run executes, a daemon
thread logs ``run.heartbeat`` every :data:`HEARTBEAT_S` seconds whatever happens (an item that hangs, workers that
do not start, a storage outage): items in flight, done, errors, and the oldest item in flight with its age. Each
acknowledgement also goes to a :class:`~runner.engine.watch.ServerWatch`, which stops a run whose model server
fails every call the same way (another protocol, HTTP 429 refusals).
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from runner.core.record import ErrorInfo
from runner.engine.watch import ServerWatch

_EVENT_INTERVAL_S = 10.0
HEARTBEAT_S = 30.0
"""Seconds between two ``run.heartbeat`` events (ARCHITECTURE: at least every 30 s while items are in flight)."""

Key = tuple[str, int]
"""An item: (task id, repeat)."""


class Progress:
    """Count finished items and report them.

    Args:
        total: items expected, or ``None`` if unknown.
        bar: draw a rich progress bar (on a terminal); otherwise emit a ``run.progress`` event at most every
            ``interval`` seconds, with ``done``, ``total``, ``errors``, ``rate`` (items/s) and ``eta_s``.
        interval: seconds between progress events.
        details: more fields for each progress event (the run's model traffic: rates, 429s, pauses, spend).
        heartbeat_s: seconds between two ``run.heartbeat`` events, logged from a thread of their own until
            :meth:`close` (``None``: no heartbeat).
    """

    def __init__(self, total: int | None, bar: bool | None = None, interval: float = _EVENT_INTERVAL_S,
                 details: Callable[[], dict[str, Any]] | None = None, heartbeat_s: float | None = None) -> None:
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
        self.watch = ServerWatch()
        self._bar: Any = None
        self._bar_task: Any = None
        self._in_flight: dict[Key, float] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        if heartbeat_s is not None:
            # In a copy of the caller's context, so the events carry what the caller bound (the run id).
            threading.Thread(target=contextvars.copy_context().run, args=(self._beat, heartbeat_s),
                             name="runner-heartbeat", daemon=True).start()
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

    def sent(self, item: Key) -> None:
        """``item`` went out to be executed (again: its clock restarts)."""
        with self._lock:
            self._in_flight.pop(item, None)
            self._in_flight[item] = time.monotonic()

    def returned(self, item: Key) -> None:
        """``item`` is no longer in flight without being done (it waits for a retry)."""
        with self._lock:
            self._in_flight.pop(item, None)

    def advance(self, status: str, duplicate: bool = False, error: ErrorInfo | None = None,
                item: Key | None = None) -> None:
        """Count one finished item with its record status; ``duplicate``: its first attempt found its record
        already written (see :attr:`ItemResult.duplicate <runner.engine.execute.ItemResult.duplicate>`); ``error``:
        what ended it (:attr:`ItemResult.error <runner.engine.execute.ItemResult.error>`); ``item``: which one, no
        longer in flight. An item the budget kept from starting (status ``skipped``) is counted in
        :attr:`skipped`, not as done.

        Raises:
            ServerStop: the model server fails every call the same way (:class:`ServerWatch`); the item is counted
                first.
        """
        if item is not None:
            self.returned(item)
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

    def heartbeat(self) -> dict[str, Any]:
        """``in_flight``, ``done``, ``errors``, and the oldest item in flight: ``oldest_task_id``,
        ``oldest_repeat`` and ``oldest_s`` (seconds since it went out; all ``None`` when nothing is in flight)."""
        now = time.monotonic()
        with self._lock:
            in_flight = len(self._in_flight)
            oldest = min(self._in_flight.items(), key=lambda entry: entry[1], default=None)
        return {
            "in_flight": in_flight,
            "done": self.done,
            "errors": self.errors,
            "oldest_task_id": oldest[0][0] if oldest else None,
            "oldest_repeat": oldest[0][1] if oldest else None,
            "oldest_s": round(now - oldest[1], 1) if oldest else None,
        }

    def _beat(self, every: float) -> None:
        while not self._stopped.wait(every):
            self._log.info("run.heartbeat", **self.heartbeat())

    def close(self) -> None:
        """Stop the bar and the heartbeat."""
        self._stopped.set()
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
