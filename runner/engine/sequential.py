"""The sequential executor: one item at a time, in this process, through ``execute_one``."""

from __future__ import annotations

from collections.abc import Iterable

from runner.core.benchmark import BenchmarkBase
from runner.engine.execute import execute_one, worker_identity
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress
from runner.engine.solution import SolutionSpec
from runner.storage.store import ResultStore


class SequentialExecutor:
    """Run every item in order in the calling process: for debugging, and the reference for the Ray executor.

    Sync solutions run directly in the event loop unless a timeout is set, so a debugger's breakpoint inside one
    works as usual.
    """

    name = "sequential"

    async def execute(
        self,
        items: Iterable[WorkItem],
        *,
        benchmark: BenchmarkBase,
        solution: SolutionSpec,
        store: ResultStore,
        run_id: str,
        timeout: float | None,
        retry_errors: int,
        progress: Progress,
    ) -> None:
        """Execute ``items``, feeding ``progress``.

        Raises:
            StorageError: a record cannot be written (the run stops; finished records stay).
        """
        built = solution.build(benchmark)
        worker = worker_identity()
        for item in items:
            result = await execute_one(
                item.task,
                item.repeat,
                built,
                store,
                run_id=run_id,
                timeout=timeout,
                retry_errors=retry_errors,
                worker=worker,
                sync_in_thread=False,
            )
            progress.advance(result.status)
