"""The sequential executor: one item at a time, in this process, through ``execute_one``."""

from __future__ import annotations

from collections.abc import Iterable

from runner.core.config import RunSettings
from runner.core.errors import ConfigError, RunnerError, exception_line
from runner.engine.context import RunContext
from runner.engine.execute import execute_one, worker_identity
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress
from runner.engine.solution import Solution


class SequentialExecutor:
    """Run every item in order in the calling process: for debugging, and the reference for the Ray executor.

    Sync solutions run directly in the event loop unless a timeout is set, so a debugger's breakpoint inside one
    works as usual.
    """

    name = "sequential"

    def __init__(self) -> None:
        self._built: Solution | None = None

    @classmethod
    def from_settings(cls, settings: RunSettings) -> SequentialExecutor:
        """The executor for a run's settings (it has none of its own)."""
        return cls()

    def preflight(self) -> None:
        """Nothing to check: this process is the executor."""

    async def start(self, context: RunContext, expected_items: int | None) -> None:
        """Build the solution, before the run writes anything.

        Raises:
            ConfigError: building it raised (one line: the solution and the exception's type and first line); a
                :class:`RunnerError` it raised is passed on as it is.
        """
        try:
            self._built = Solution(context.solution.build(context.benchmark))
        except RunnerError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever a user's constructor raises becomes one line
            raise ConfigError(
                f"the solution {context.solution.display!r} could not be built ({exception_line(exc)})"
            ) from None

    async def execute(self, items: Iterable[WorkItem], context: RunContext, progress: Progress) -> None:
        """Execute ``items`` with the solution :meth:`start` built, feeding ``progress``.

        Raises:
            StorageError: a record cannot be written (the run stops; finished records stay).
            RunStopped: the model server speaks another protocol (see :mod:`runner.engine.watch`).
        """
        assert self._built is not None, "start() builds the solution first"
        worker = worker_identity()
        for item in items:
            result = await execute_one(item, self._built, context, worker=worker, sync_in_thread=False)
            progress.advance(result.status, duplicate=result.duplicate, error=result.error)

    async def close(self) -> None:
        """Drop the built solution."""
        self._built = None
