"""The plan: the (task, repeat) items of a run that still need a record, streamed.

The benchmark is iterated lazily and items come out one at a time: the plan holds no task beyond the current one,
only the set of finished keys read at resume (which shrinks as the plan passes them) and the key of every task it
has seen, to tell a duplicate task id (about 100 bytes per task).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import structlog

from runner.core.benchmark import BenchmarkBase
from runner.core.errors import BenchmarkError, InvalidTask
from runner.core.task import Task
from runner.storage.keys import encode_key


@dataclass(frozen=True)
class WorkItem:
    """One unit of work: a task, a 0-based repeat index, the task's 0-based position in the benchmark's iteration
    (``index``), which the record keeps so a report can tell the tasks within a later, lower ``limit``, and the
    number of the run it belongs to among the runs executed together (``cell``: 0 for a run alone; a matrix's
    cell, :mod:`runner.engine.workload`)."""

    task: Task
    repeat: int
    index: int
    cell: int = 0

    @property
    def key(self) -> tuple[int, str, int]:
        """The item among every item executed together: (cell, task id, repeat)."""
        return self.cell, self.task.id, self.repeat


class Plan:
    """Iterate the items of ``benchmark`` that have no record yet, task by task, repeats together.

    Args:
        benchmark: the benchmark.
        repeats: repeats per task.
        limit: only the first ``limit`` tasks (``None``: all).
        done: ``(task key, repeat)`` pairs that already have a record (from :meth:`ResultStore.done_items`); the
            plan keeps its own copy and removes each pair from it when it skips it.
        cell: the run's number among the runs executed together, carried by its items.

    A task position whose id an earlier position had (a duplicate task id) is left out, with a
    ``plan.duplicate_task`` warning: each (task id, repeat) has one record, so running it again would pay for a
    record that is never kept. The plan judges duplicates by the ids it has seen (it keeps the key of every task,
    about 100 bytes each), the same way on a resume as on the first run, never by refused record writes.

    After iteration, :attr:`n_tasks` is the number of task positions planned (duplicates included),
    :attr:`duplicate_tasks` the positions left out as duplicates and :attr:`skipped` the items left out because
    their record existed.

    Raises (while iterating):
        BenchmarkError: a task has an empty id; the message names its position. Items before it were planned
            (and their records stay); none after it are.
    """

    def __init__(
        self,
        benchmark: BenchmarkBase,
        repeats: int,
        limit: int | None = None,
        done: set[tuple[str, int]] | None = None,
        cell: int = 0,
    ) -> None:
        self.benchmark = benchmark
        self.cell = cell
        self.repeats = repeats
        self.limit = limit
        self.done = set(done) if done is not None else set()
        # Counted now: the plan removes each finished pair from done as it passes it.
        self._finished = sum(1 for _, repeat in self.done if repeat < repeats)
        self.n_tasks = 0
        self.duplicate_tasks = 0
        self.skipped = 0
        self.exhausted = False
        self._seen: set[str] = set()

    def expected_items(self) -> int | None:
        """Items to run, from the benchmark's size, less the finished ones the plan was given, for the ``run.start``
        line and progress display; the same number however far the plan was iterated; ``None`` if the size is
        unknown.

        Exact without ``limit``; with one it assumes finished items lie within the limit (an estimate).
        """
        size = self.benchmark.size()
        if size is None:
            return None
        if self.limit is not None:
            size = min(size, self.limit)
        return max(size * self.repeats - self._finished, 0)

    def __iter__(self) -> Iterator[WorkItem]:
        for index, task in enumerate(self._tasks()):
            if not task.id:
                raise self._bad_task(index, "its id is empty (every task needs a unique, non-empty id)")
            self.n_tasks += 1
            key = encode_key(task.id)
            if key in self._seen:
                self.duplicate_tasks += 1
                structlog.get_logger("runner").warning(
                    "plan.duplicate_task", task_id=task.id, index=index,
                    detail="an earlier task of the benchmark has this id; its records stand for both, so this one "
                    "is not run (give each task a unique id to run both)")
                continue
            self._seen.add(key)
            for repeat in range(self.repeats):
                if (key, repeat) in self.done:
                    self.done.discard((key, repeat))
                    self.skipped += 1
                    continue
                yield WorkItem(task, repeat, index, self.cell)
        self.exhausted = True

    def _tasks(self) -> Iterator[Task]:
        """The benchmark's tasks up to ``limit``; a task the benchmark cannot build (:class:`InvalidTask`) becomes
        a :class:`BenchmarkError` naming its position."""
        tasks = iter(self.benchmark)
        index = 0
        while self.limit is None or index < self.limit:
            try:
                task = next(tasks)
            except StopIteration:
                return
            except InvalidTask as exc:
                raise self._bad_task(index, str(exc)) from None
            yield task
            index += 1

    def _bad_task(self, index: int, problem: str) -> BenchmarkError:
        return BenchmarkError(
            f"task at position {index} (0-based) of benchmark {self.benchmark.name!r}: {problem}; fix the "
            "benchmark and rerun to resume (records written so far are kept)"
        )
