"""The sequential executor: one item at a time, in this process, through ``execute_one``.

With a time limit (``--timeout`` or ``--metric-timeout``), each item runs on an event loop in a thread of its own
(:class:`~runner.engine.item.watchdog.ItemLoop`): an item that blocks that loop past its limit is recorded as a
``timeout`` from here and abandoned with its loop, and the next item gets a fresh one. Without a limit, items run
in this process's own loop (a debugger's breakpoint in a solution works as usual), and nothing is abandoned.
"""

from __future__ import annotations

from collections.abc import Iterable

from runner.core.config import RunSettings
from runner.core.errors import ConfigError, RunnerError, exception_line
from runner.engine.context import RunContext
from runner.core.record import ErrorInfo
from runner.engine.item.execute import ItemSite, SolutionOutcome, execute_one, record_fault, worker_identity
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress
from runner.engine.item.solution import Solution
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

    @classmethod
    def from_settings(cls, settings: RunSettings) -> SequentialExecutor:
        """The executor for a run's settings (it has none of its own)."""
        return cls()

    def preflight(self) -> None:
        """Nothing to check: this process is the executor."""

    async def start(self, context: RunContext, traffic: TrafficControl, expected_items: int | None) -> None:
        """Build the solution, before the run writes anything; its items' model calls go through ``traffic``.

        Raises:
            ConfigError: building it raised (one line: the solution and the exception's type and first line); a
                :class:`RunnerError` it raised is passed on as it is.
        """
        try:
            solution = Solution(context.solution.build(context.benchmark))
        except RunnerError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever a user's constructor raises becomes one line
            raise ConfigError(
                f"the solution {context.solution.display!r} could not be built ({exception_line(exc)})"
            ) from None
        self._site = ItemSite(context, solution, traffic, worker_identity(), sync_in_thread=False)

    async def execute(self, items: Iterable[WorkItem], context: RunContext, progress: Progress) -> None:
        """Execute ``items`` with the solution :meth:`start` built, feeding ``progress``.

        Raises:
            StorageError: a record cannot be written (the run stops; finished records stay).
            RunStopped: the model server fails every call the same way (see :mod:`runner.engine.watch`).
        """
        assert self._site is not None, "start() builds the solution first"
        worker = self._site.worker
        # metric_limit is set whenever timeout or metric_timeout is.
        item_loop = ItemLoop() if context.settings.metric_limit is not None else None
        try:
            for item in items:
                key = (item.task.id, item.repeat)
                progress.sent(key)
                coroutine = execute_one(item, self._site)
                if item_loop is None:
                    result = await coroutine
                    progress.acknowledge(result, item=key)
                    continue
                answer = await item_loop.run(coroutine)
                if isinstance(answer, Alarm):
                    item_loop.abandon()
                    item_loop = ItemLoop()
                    progress.advance(await _record_blocked(item, answer, context, worker), item=key)
                else:
                    progress.acknowledge(answer, item=key)
        finally:
            if item_loop is not None:
                item_loop.close()

    async def close(self) -> None:
        """Drop the built solution."""
        self._site = None


async def _record_blocked(item: WorkItem, alarm: Alarm, context: RunContext, worker: dict[str, object]) -> str:
    """Store the ``timeout`` record of an item that blocked its event loop; the status of its stored record."""
    error = ErrorInfo(type=alarm.error_type, message=alarm.message)
    return await record_fault(item, 1, SolutionOutcome.failed(error, alarm.status), context, dict(worker))
