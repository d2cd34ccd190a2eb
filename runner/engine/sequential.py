"""The sequential executor: one item at a time, in this process, through ``execute_one``."""

from __future__ import annotations

from collections.abc import Iterable

from runner.engine.context import RunContext
from runner.engine.execute import execute_one, worker_identity
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress


class SequentialExecutor:
    """Run every item in order in the calling process: for debugging, and the reference for the Ray executor.

    Sync solutions run directly in the event loop unless a timeout is set, so a debugger's breakpoint inside one
    works as usual.
    """

    name = "sequential"

    async def execute(
        self,
        items: Iterable[WorkItem],
        context: RunContext,
        progress: Progress,
    ) -> None:
        """Execute ``items``, feeding ``progress``.

        Raises:
            StorageError: a record cannot be written (the run stops; finished records stay).
        """
        built = context.solution.build(context.benchmark)
        worker = worker_identity()
        for item in items:
            result = await execute_one(
                item.task,
                item.repeat,
                built,
                context.store,
                run_id=context.run_id,
                task_index=item.index,
                timeout=context.timeout,
                retry_errors=context.retry_errors,
                worker=worker,
                sync_in_thread=False,
            )
            progress.advance(result.status, duplicate=result.duplicate)
