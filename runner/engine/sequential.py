"""The sequential executor: one item at a time, in this process, on the path of ``execute_one``.

Each item's solution and metrics run before the next item starts (:func:`~runner.engine.item.execute.execute_one`
with ``write_behind``); its record is then written in the background
(:meth:`~runner.engine.item.execute.PendingWrite.write`) while the next item runs, and counted done once stored.
With a time limit (``--timeout`` or ``--metric-timeout``), each item runs on an event loop in a thread of its own
(:class:`~runner.engine.item.watchdog.ItemLoop`): an item that blocks that loop past its limit is recorded as a
``timeout`` from here (:func:`~runner.engine.item.execute.record_fault`) and abandoned with its loop, and the next
item gets a fresh one. Without a limit, items run in this process's own loop (a debugger's breakpoint in a solution
works as usual), and nothing is abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Coroutine, Iterable
from typing import Any

import psutil
import structlog

from runner.core.config import RunSettings
from runner.engine.item.execute import Fault, ItemResult, execute_one, record_fault, worker_identity
from runner.engine.item.watchdog import Alarm, ItemLoop
from runner.engine.plan import WorkItem
from runner.engine.replicas import visible_gpus
from runner.engine.run_context import RunContext
from runner.engine.worker_cells import WorkerCells
from runner.engine.workload import WorkerSetup, Workload
from runner.traffic.control import TrafficControl


class SequentialExecutor:
    """Run every item in order in the calling process: for debugging, and the reference for the Ray executor.

    Sync solutions run directly in the event loop unless a time limit is set, so a debugger's breakpoint inside one
    works as usual; with one, items run on an :class:`ItemLoop` that a blocked item is abandoned with. A matrix's
    cells run one after another, model by model (the baseline first), each model loaded once
    (:class:`~runner.engine.worker_cells.WorkerCells`).
    """

    name = "sequential"

    def __init__(self) -> None:
        self.cells: WorkerCells | None = None
        self.loads: list[dict[str, Any]] = []
        self._before: set[int] = set()

    @classmethod
    def from_settings(cls, settings: RunSettings) -> SequentialExecutor:
        """The executor for a run's settings (it has none of its own)."""
        return cls()

    def preflight(self) -> None:
        """Nothing to check: this process is the executor."""

    async def start(self, setup: WorkerSetup, traffic: TrafficControl, expected_items: int | None) -> None:
        """Start the models the run serves (one replica each, in this process's tree, on the GPUs of
        ``CUDA_VISIBLE_DEVICES`` or the CPU) and build the setup's solutions, before the run writes anything; its
        items' model calls go through ``traffic``.

        Raises:
            ReplicaStartError: a served model could not start (the server's own line and its log).
            ConfigError: building a solution raised (one line: the solution and the exception's type and first
                line); a :class:`RunnerError` it raised is passed on as it is.
        """
        self.cells = WorkerCells(setup, traffic, worker_identity(), gpu_ids=visible_gpus(), label="driver",
                                 sync_in_thread=False)
        await asyncio.to_thread(self.cells.start)
        self._before = _children()

    async def execute(self, work: Workload) -> None:
        """Execute ``work``'s items with the solutions :meth:`start` built, feeding each cell's progress: the cells
        any worker runs first, then each placed model's, loaded in turn (baseline first, then in order; a watch's
        checkpoints as they come).

        One item at a time runs its solution and metrics; its record is then written in the background while the
        next item runs (at most :data:`WRITES_IN_FLIGHT` writes at once), and the item counts as done only once
        its record is stored, so a crash loses nothing that was counted.

        Raises:
            StorageError: a record cannot be written (the run stops; finished records stay).
            RunStopped: the model server fails every call the same way (see :mod:`runner.engine.watch`).
        """
        assert self.cells is not None, "start() builds the solutions first"
        first = next(iter(work.cells.values()))
        settings = first.context.settings
        # A limit the user gave: each item on a loop of its own, abandoned if the item blocks it. The default limit
        # alone holds for whatever awaits or runs in a thread, in this process's loop.
        self._loop = ItemLoop() if settings.limits_given and settings.metric_limit is not None else None
        try:
            while True:
                model = self._next_group(work)
                if model is _NOTHING:
                    if not work.open:
                        return
                    await work.changed.wait()
                    work.changed.clear()
                    continue
                items = work.take_group(model)
                if model is not None:
                    first = next(items, None)
                    if first is None:
                        continue  # nothing of the model's is pending: it is not loaded (placement's rule 3)
                    if not await self._load(work, model):
                        continue
                    # The first item was drawn before the load: it runs only if its cell did not stop at the load.
                    items = (item for item in itertools.chain([first], items) if work.cells[item.cell].stopped is None)
                await self._run_items(work, items)
        finally:
            if self._loop is not None:
                self._loop.close()

    def _next_group(self, work: Workload) -> Any:
        """The group to run next: the cells any worker runs, else the model placement puts first (the baseline, then
        the newest checkpoint in a watch, then in order); :data:`_NOTHING` when no group has items."""
        if None in work.groups:
            return None
        waiting = [placed for model, placed in work.models.items() if model in work.groups]
        if not waiting:
            return _NOTHING
        newest = (lambda placed: placed.step if placed.step is not None else -1) if work.newest_first else \
            (lambda placed: 0)
        return max(waiting, key=lambda placed: (placed.baseline, newest(placed), -placed.order)).model

    async def _load(self, work: Workload, model: str) -> bool:
        """Hold ``model`` to run its cells; ``False`` when its replica could not start (its cells stop)."""
        assert self.cells is not None
        cells, replicas = work.load_of(model)
        if not cells:
            return False
        report = await asyncio.to_thread(self.cells.load, model, cells, replicas)
        self.loads.append({**report, "worker": 0, "node": None})
        for index, why in report["failed"].items():
            work.stop_cell(index, why)
        if report["error"] is not None:
            structlog.get_logger("runner").warning("worker.load_failed", worker=0, model=model,
                                                   error=report["error"], detail="its cells stop (load_failed)")
            for index in cells:
                work.stop_cell(index, f"load_failed: {report['error']}")
            return False
        structlog.get_logger("runner").info("worker.loaded", worker=0, model=model, seconds=report["seconds"],
                                            replica_starts=report["replica_starts"], swaps=report["swaps"],
                                            builds=report["builds"])
        return True

    async def _run_items(self, work: Workload, items: Iterable[WorkItem]) -> None:
        """Run ``items`` one at a time (see :meth:`execute`)."""
        assert self.cells is not None
        cells, writes = self.cells, _Writes(work)
        try:
            for item in items:
                await cells.ready()
                site, progress = cells.site(item.cell), work.progress(item.cell)
                key = (item.task.id, item.repeat)
                progress.sent(key)
                coroutine = execute_one(item, site, write_behind=True)
                answer = await (coroutine if self._loop is None else self._loop.run(coroutine))
                if isinstance(answer, Alarm):
                    self._loop.abandon()  # type: ignore[union-attr]
                    self._loop = ItemLoop()
                    progress.advance(await _record_blocked(item, answer, site.context, site.worker), item=key)
                elif isinstance(answer, ItemResult):
                    progress.acknowledge(answer, item=key)
                else:
                    # The server watch sees the outcome before the next item starts; the item counts as done once
                    # its record is stored.
                    writes.add(item, answer.write())
                    progress.observe(answer.status, answer.cause)
                    await writes.room()
            await writes.drain()
        finally:
            await writes.close()

    async def close(self) -> None:
        """Drop the built solutions, stop the served models' replicas (their logs go to the run's ``replicas/``), and
        end the processes its items started and left behind (a solution that
        starts ``sleep`` or a tool server and never waits for it), as Ray ends a worker's when the worker exits:
        SIGTERM, then SIGKILL after :data:`STRAY_GRACE_S` seconds."""
        if self.cells is not None:
            await asyncio.to_thread(self.cells.stop, True)
            self.cells = None
        await asyncio.to_thread(end_strays, self._before)

    def details(self) -> dict[str, Any]:
        """The served models' replicas in this process: how many are ready, how many starting (or restarting)."""
        if self.cells is None:
            return {}
        states = [status.state for status in self.cells.statuses()]
        if not states:
            return {}
        return {"replicas": {"ready": states.count("ready"), "starting": len(states) - states.count("ready")}}


_NOTHING = object()
"""No group has items to run (:meth:`SequentialExecutor._next_group`)."""


async def _record_blocked(item: WorkItem, alarm: Alarm, context: RunContext, worker: dict[str, Any]) -> str:
    """Store the ``timeout`` record of an item that blocked its event loop; the status of its stored record."""
    return await record_fault(item, 1, Fault(alarm.status, alarm.error_type, alarm.message, dict(worker)), context)


STRAY_GRACE_S = 3.0
"""Seconds a process the run's items left behind has between SIGTERM and SIGKILL when the run ends."""


def _children() -> set[int]:
    """The process ids of this process's descendants now."""
    return {child.pid for child in psutil.Process().children(recursive=True)}


def end_strays(before: set[int]) -> int:
    """End this process's descendants that were not there in ``before`` (SIGTERM, SIGKILL after
    :data:`STRAY_GRACE_S` seconds); how many there were. Logs ``run.child_processes`` when there were any."""
    strays = []
    for child in psutil.Process().children(recursive=True):
        if child.pid in before:
            continue
        try:
            name = child.name()
            child.terminate()
            strays.append((child, name))
        except psutil.Error:
            continue
    if not strays:
        return 0
    _, alive = psutil.wait_procs([child for child, _ in strays], timeout=STRAY_GRACE_S)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    structlog.get_logger("runner").warning(
        "run.child_processes", ended=len(strays), names=sorted({name for _, name in strays}),
        detail="processes the run's items started and left running were ended with the run (on Ray, a worker's end "
        "with the worker); wait for the processes a solution starts, or start them in its constructor")
    return len(strays)


WRITES_IN_FLIGHT = 4
"""Records the sequential executor writes in the background at once while later items run. A driver killed
meanwhile loses those items' work, as it loses the item running: the same command runs them again."""


class _Writes:
    """Record writes in flight. Each is acknowledged to its cell's progress the moment its record is stored (its
    outcome was shown to the server watch when its record was built). Once a write fails, :meth:`room` and
    :meth:`drain` let the others end and raise the failure of the earliest item, so that the run's last line names the
    first record the storage refused, as when records are written one at a time."""

    def __init__(self, work: Workload) -> None:
        self.work = work
        self.pending: dict[asyncio.Future[ItemResult], tuple[int, WorkItem]] = {}
        self.failed: list[tuple[int, BaseException]] = []
        self._count = 0

    def add(self, item: WorkItem, write: Coroutine[Any, Any, ItemResult]) -> None:
        """Start ``write``, the record of ``item``."""
        future = asyncio.ensure_future(write)
        self.pending[future] = (self._count, item)
        self._count += 1
        future.add_done_callback(self._ended)

    def _ended(self, future: asyncio.Future[ItemResult]) -> None:
        entry = self.pending.pop(future, None)
        if entry is None or future.cancelled():
            return
        error = future.exception()
        if error is not None:
            self.failed.append((entry[0], error))
            return
        item = entry[1]
        self.work.progress(item.cell).acknowledge(future.result(), item=(item.task.id, item.repeat), watched=True)

    async def room(self) -> None:
        """Wait until fewer than :data:`WRITES_IN_FLIGHT` writes are in flight.

        Raises:
            StorageError: a write failed.
        """
        await self._raise()
        while len(self.pending) >= WRITES_IN_FLIGHT:
            await asyncio.wait(list(self.pending), return_when=asyncio.FIRST_COMPLETED)
            await self._raise()

    async def drain(self) -> None:
        """Wait until every write ended.

        Raises:
            StorageError: a write failed.
        """
        await self.close()
        await self._raise()

    async def close(self) -> None:
        """Let the writes still in flight end (a write runs in a thread and cannot be stopped midway)."""
        if self.pending:
            await asyncio.gather(*self.pending, return_exceptions=True)

    async def _raise(self) -> None:
        if self.failed:
            await self.close()
            raise min(self.failed, key=lambda failure: failure[0])[1]
