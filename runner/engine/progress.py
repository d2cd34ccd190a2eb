"""Progress of a run: a bar on a terminal, structlog ``run.progress`` events elsewhere, a heartbeat, and
``progress.json``.

Both executors feed it the small acknowledgements of finished items (it never sees records) and say when each item
went out (:meth:`Progress.sent`), so it knows what is in flight and since when. Each acknowledgement carries the
item's metric values, from which it keeps live statistics (:mod:`runner.engine.live`): the bar and the progress
events show the running mean and 95 % interval of the benchmark's headline metric, and ``progress.json`` in the run
directory (written at most every :data:`PROGRESS_FILE_S` seconds and at the end, from a thread of its own) holds the
counts by status, the rate, the ETA and every metric's running mean, interval and per-category means, for
``python -m runner status`` to show while the run executes. While a run executes, a daemon thread logs
``run.heartbeat`` every :data:`HEARTBEAT_S` seconds whatever happens (an item that hangs, workers that do not start, a
storage outage): items in flight, done, errors, and the oldest item in flight with its age. Each acknowledgement also
goes to a :class:`~runner.engine.watch.ServerWatch`, which stops a run whose model server fails every call the same
way (another protocol, HTTP 429 refusals).
"""

from __future__ import annotations

import contextvars
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from runner.core.errors import ServerStop
from runner.core.record import ErrorInfo
from runner.engine.live import LiveStats
from runner.engine.watch import ServerWatch
from runner.storage.manifest import utc_now

if TYPE_CHECKING:
    from runner.engine.item.execute import ItemResult

_EVENT_INTERVAL_S = 10.0
HEARTBEAT_S = 30.0
"""Seconds between two ``run.heartbeat`` events (ARCHITECTURE: at least every 30 s while items are in flight)."""
PROGRESS_FILE_S = 10.0
"""The longest time between two writes of ``progress.json`` while a run executes (seconds)."""

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
        headline: the metrics whose running mean the bar and the events show, in order of preference
            (``BenchmarkBase.headline_metrics``; empty: the first metric seen).
        sink: writes ``progress.json`` (its bytes), at most every ``file_s`` seconds from a thread of its own and
            once more at :meth:`close` (``None``: no file). A write that fails is logged once and never stops the run.
        file_s: seconds between two writes of the file.
        run_id: the run's id, in the file.
        on_done: called with each item counted done (not a skipped one) and its record's JSON when the driver wrote
            it itself (else ``None``): the run's result-shard compactor (:class:`runner.storage.compaction.
            Compactor`).
        on_stop: called with the :class:`~runner.core.errors.ServerStop` the server watch raises, instead of
            raising it (a matrix stops that cell alone; ``None``: raised, the run stops).
    """

    def __init__(self, total: int | None, bar: bool | None = None, interval: float = _EVENT_INTERVAL_S,
                 details: Callable[[], dict[str, Any]] | None = None, heartbeat_s: float | None = None,
                 headline: tuple[str, ...] = (), sink: Callable[[bytes], None] | None = None,
                 file_s: float = PROGRESS_FILE_S, run_id: str | None = None,
                 on_done: Callable[[Key, bytes | None], None] | None = None,
                 on_stop: Callable[[ServerStop], None] | None = None) -> None:
        self.total = total
        self.details = details
        self.live = LiveStats(headline=tuple(headline))
        self.by_status: Counter[str] = Counter()
        self.run_id = run_id
        self.on_done = on_done
        self.on_stop = on_stop
        self._sink = sink
        self._sink_failed = False
        self.done = 0
        self.skipped = 0
        self.errors = 0
        self.duplicates = 0
        self.started = time.monotonic()
        self._first_done: float | None = None
        self._first_sent: float | None = None
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
        if sink is not None:
            threading.Thread(target=contextvars.copy_context().run, args=(self._keep_file, file_s),
                             name="runner-progress-file", daemon=True).start()
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
                TextColumn("{task.fields[stats]}"),
                redirect_stderr=True,
                transient=False,
            )
            self._bar_task = self._bar.add_task("items", total=total, errors=0, stats="")
            self._bar.start()

    def sent(self, item: Key) -> None:
        """``item`` went out to be executed (again: its clock restarts)."""
        with self._lock:
            self._in_flight.pop(item, None)
            self._in_flight[item] = now = time.monotonic()
            if self._first_sent is None:
                self._first_sent = now

    def returned(self, item: Key) -> None:
        """``item`` is no longer in flight without being done (it waits for a retry)."""
        with self._lock:
            self._in_flight.pop(item, None)

    def acknowledge(self, result: ItemResult, item: Key | None = None, watched: bool = False) -> None:
        """Count one finished item from its acknowledgement: :meth:`advance` with its status, duplicate flag and
        error, after its metric values entered the live statistics; ``watched``: the server watch saw its outcome
        already (:meth:`observe`).

        Raises:
            ProtocolStop: as :meth:`advance`.
        """
        if result.status != "skipped":
            self.live.add(result.scores, result.category)
        self.advance(result.status, duplicate=result.duplicate, error=result.error, item=item, watched=watched,
                     stored=result.stored)

    def observe(self, status: str, error: ErrorInfo | None) -> None:
        """Show an item's outcome to the server watch before the item is counted (an executor that writes records
        in the background does, so that a server failing every call stops the run before the next item starts).

        Raises:
            ServerStop: as :meth:`ServerWatch.observe <runner.engine.watch.ServerWatch.observe>` (unless ``on_stop``
                takes it).
        """
        self._observe(status, error)

    def _observe(self, status: str, error: ErrorInfo | None) -> None:
        try:
            self.watch.observe(status, error)
        except ServerStop as stop:
            if self.on_stop is None:
                raise
            self.on_stop(stop)

    def advance(self, status: str, duplicate: bool = False, error: ErrorInfo | None = None,
                item: Key | None = None, watched: bool = False, stored: bytes | None = None) -> None:
        """Count one finished item with its record status; ``duplicate``: its first attempt found its record
        already written (see :attr:`ItemResult.duplicate <runner.engine.item.execute.ItemResult.duplicate>`); ``error``:
        what ended it (:attr:`ItemResult.error <runner.engine.item.execute.ItemResult.error>`); ``item``: which one, no
        longer in flight; ``watched``: the server watch saw it already (:meth:`observe`); ``stored``: its record's
        JSON when the driver wrote it (for ``on_done``). An item the budget kept from starting (status ``skipped``)
        is counted in :attr:`skipped`, not as done.

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
        self.by_status[status] += 1
        if self.on_done is not None and item is not None:
            self.on_done(item, stored)
        self.duplicates += duplicate
        if self._first_done is None:
            self._first_done = time.monotonic()
        if status != "ok":
            self.errors += 1
        if self._bar is not None:
            self._bar.update(self._bar_task, advance=1, errors=self.errors, stats=self.live.line())
        elif time.monotonic() - self._last_event >= self.interval:
            self._last_event = time.monotonic()
            self._log.info("run.progress", **self.snapshot(), running=self.live.line() or None,
                           **(self.details() if self.details else {}))
        if not watched:
            self._observe(status, error)

    def snapshot(self) -> dict[str, Any]:
        """``done``, ``total``, ``errors``, ``rate`` (items/s) and ``eta_s`` (seconds, or ``None``).

        The rate counts the items done since the first one went out to be executed (:meth:`sent`), so a Ray
        cluster's start does not count, and it is the run's own throughput at its end. Counting from the first
        item *done* instead, as this did, read 0.99 items/s for 20 items in 58 s: with 16 in flight, items of one
        minute all finish in the last twenty seconds. Without a :meth:`sent` (a caller that does not report it), it
        counts from the first item done.
        """
        rate = None
        now = time.monotonic()
        if self._first_sent is not None and self.done > 0 and now > self._first_sent:
            rate = self.done / (now - self._first_sent)
        elif self._first_done is not None and self.done > 1:
            rate = (self.done - 1) / max(now - self._first_done, 1e-9)
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

    def file(self, state: str = "running") -> dict[str, Any]:
        """The content of ``progress.json``: ``run_id``, ``state`` (``running``, or ``ended`` from :meth:`close`),
        ``updated_at`` (ISO-8601 UTC), the counts (``done``, ``total``, ``errors``, ``skipped``, ``by_status``),
        ``rate`` (items/s), ``eta_s``, ``in_flight`` and the oldest item in flight, and the live statistics:
        ``headline``, ``metrics`` (name -> ``mean``, ``ci95``, ``stderr``, ``n``), ``by_category`` (category ->
        name -> ``mean``, ``n``); plus the run's model traffic when it has any."""
        snapshot, beat = self.snapshot(), self.heartbeat()
        return {"run_id": self.run_id, "state": state, "updated_at": utc_now(), **snapshot, "skipped": self.skipped,
                "by_status": dict(sorted(self.by_status.items())),
                **{key: value for key, value in beat.items() if key not in snapshot},
                **self.live.snapshot(), **(self.details() if self.details else {})}

    def _write_file(self, state: str) -> None:
        assert self._sink is not None
        try:
            self._sink(json.dumps(self.file(state), indent=1, default=str).encode())
        except Exception as exc:  # noqa: BLE001 - the progress file is for people; it never stops the run
            if not self._sink_failed:
                self._sink_failed = True
                self._log.warning("run.progress_file", error=f"{type(exc).__name__}: {exc}"[:300],
                                  detail="progress.json could not be written; the run goes on")

    def _keep_file(self, every: float) -> None:
        while not self._stopped.wait(every):
            self._write_file("running")

    def close(self) -> None:
        """Stop the bar, the heartbeat and the progress file's thread, and write the file once more (``ended``)."""
        self._stopped.set()
        if self._sink is not None:
            self._write_file("ended")
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
