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
from collections.abc import Coroutine, Iterable
from typing import Any

import psutil
import structlog

from runner.core.config import RunSettings
from runner.core.errors import ConfigError, RunnerError, exception_line
from runner.engine.run_context import RunContext
from runner.engine.item.execute import Fault, ItemResult, ItemSite, execute_one, record_fault, worker_identity
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress
from runner.engine.replicas import WorkerReplicas, visible_gpus
from runner.engine.item.call_solution import Solution
from runner.engine.item.watchdog import Alarm, ItemLoop
from runner.traffic.control import TrafficControl


class SequentialExecutor:
    """Run every item in order in the calling process: for debugging, and the reference for the Ray executor.

    Sync solutions run directly in the event loop unless a time limit is set, so a debugger's breakpoint inside one
    works as usual; with one, items run on an :class:`ItemLoop` that a blocked item is abandoned with.
    """

    name = "sequential"

    def __init__(self) -> None:
        self._site: ItemSite | None = None
        self._before: set[int] = set()
        self.replicas: WorkerReplicas | None = None

    @classmethod
    def from_settings(cls, settings: RunSettings) -> SequentialExecutor:
        """The executor for a run's settings (it has none of its own)."""
        return cls()

    def preflight(self) -> None:
        """Nothing to check: this process is the executor."""

    async def start(self, context: RunContext, traffic: TrafficControl, expected_items: int | None) -> None:
        """Start the models the run serves (one replica each, in this process's tree, on the GPUs of
        ``CUDA_VISIBLE_DEVICES`` or the CPU) and build the solution, before the run writes anything; its items' model
        calls go through ``traffic``.

        Raises:
            ReplicaStartError: a served model could not start (the server's own line and its log).
            ConfigError: building the solution raised (one line: the solution and the exception's type and first
                line); a :class:`RunnerError` it raised is passed on as it is.
        """
        if context.replicas:
            self.replicas = WorkerReplicas(context, visible_gpus(), label="driver")
            await asyncio.to_thread(self.replicas.start)
        try:
            solution = Solution(context.solution.build(context.benchmark))
        except RunnerError:
            await self._stop_replicas(keep_logs=False)
            raise
        except Exception as exc:  # noqa: BLE001 - whatever a user's constructor raises becomes one line
            await self._stop_replicas(keep_logs=False)
            raise ConfigError(
                f"the solution {context.solution.display!r} could not be built ({exception_line(exc)})"
            ) from None
        self._site = ItemSite(context, solution, traffic, worker_identity(), sync_in_thread=False)
        self._before = _children()

    async def execute(self, items: Iterable[WorkItem], context: RunContext, progress: Progress) -> None:
        """Execute ``items`` with the solution :meth:`start` built, feeding ``progress``.

        One item at a time runs its solution and metrics; its record is then written in the background while the
        next item runs (at most :data:`WRITES_IN_FLIGHT` writes at once), and the item counts as done only once
        its record is stored, so a crash loses nothing that was counted.

        Raises:
            StorageError: a record cannot be written (the run stops; finished records stay).
            RunStopped: the model server fails every call the same way (see :mod:`runner.engine.watch`).
        """
        assert self._site is not None, "start() builds the solution first"
        site = self._site
        # A limit the user gave: each item on a loop of its own, abandoned if the item blocks it. The default limit
        # alone holds for whatever awaits or runs in a thread, in this process's loop.
        item_loop = ItemLoop() if context.settings.limits_given and context.settings.metric_limit is not None else None
        writes = _Writes(progress)
        try:
            for item in items:
                if self.replicas is not None:
                    await self.replicas.ready()
                key = (item.task.id, item.repeat)
                progress.sent(key)
                coroutine = execute_one(item, site, write_behind=True)
                answer = await (coroutine if item_loop is None else item_loop.run(coroutine))
                if isinstance(answer, Alarm):
                    item_loop.abandon()  # type: ignore[union-attr]
                    item_loop = ItemLoop()
                    progress.advance(await _record_blocked(item, answer, context, site.worker), item=key)
                elif isinstance(answer, ItemResult):
                    progress.acknowledge(answer, item=key)
                else:
                    # The server watch sees the outcome before the next item starts; the item counts as done once
                    # its record is stored.
                    writes.add(key, answer.write())
                    progress.observe(answer.status, answer.cause)
                    await writes.room()
            await writes.drain()
        finally:
            await writes.close()
            if item_loop is not None:
                item_loop.close()

    async def close(self) -> None:
        """Drop the built solution, stop the served models' replicas (their logs go to the run's ``replicas/``), and
        end the processes its items started and left behind (a solution that
        starts ``sleep`` or a tool server and never waits for it), as Ray ends a worker's when the worker exits:
        SIGTERM, then SIGKILL after :data:`STRAY_GRACE_S` seconds."""
        self._site = None
        await self._stop_replicas(keep_logs=True)
        await asyncio.to_thread(end_strays, self._before)

    def details(self) -> dict[str, Any]:
        """The served models' replicas in this process: how many are ready, how many starting (or restarting)."""
        if self.replicas is None:
            return {}
        states = [status.state for status in self.replicas.statuses()]
        return {"replicas": {"ready": states.count("ready"), "starting": len(states) - states.count("ready")}}

    async def _stop_replicas(self, keep_logs: bool) -> None:
        if self.replicas is not None:
            await asyncio.to_thread(self.replicas.stop, keep_logs)
            self.replicas = None


async def _record_blocked(item: WorkItem, alarm: Alarm, context: RunContext, worker: dict[str, object]) -> str:
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
    """Record writes in flight. Each is acknowledged to ``progress`` the moment its record is stored (its outcome
    was shown to the server watch when its record was built). Once a write fails, :meth:`room` and :meth:`drain` let
    the others end and raise the failure of the earliest item, so that the run's last line names the first record
    the storage refused, as when records are written one at a time."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.pending: dict[asyncio.Future[ItemResult], tuple[int, tuple[str, int]]] = {}
        self.failed: list[tuple[int, BaseException]] = []
        self._count = 0

    def add(self, key: tuple[str, int], write: Coroutine[Any, Any, ItemResult]) -> None:
        """Start ``write``, the record of the item ``key``."""
        future = asyncio.ensure_future(write)
        self.pending[future] = (self._count, key)
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
        self.progress.acknowledge(future.result(), item=entry[1], watched=True)

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
