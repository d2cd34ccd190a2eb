"""The plan: the (task, repeat) items of a run that still need a record, streamed.

The benchmark is iterated lazily and items come out one at a time, so the plan of a million-task benchmark costs
no more memory than that of a thousand-task one (beyond the set of finished keys read at resume).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from runner.core.benchmark import BenchmarkBase
from runner.core.task import Task
from runner.storage.keys import encode_key


@dataclass(frozen=True)
class WorkItem:
    """One unit of work: a task and a 0-based repeat index."""

    task: Task
    repeat: int


class Plan:
    """Iterate the items of ``benchmark`` that have no record yet, task by task, repeats together.

    Args:
        benchmark: the benchmark.
        repeats: repeats per task.
        limit: only the first ``limit`` tasks (``None``: all).
        done: ``(task key, repeat)`` pairs that already have a record (from :meth:`ResultStore.done_items`).

    After iteration, :attr:`n_tasks` is the number of tasks planned and :attr:`skipped` the items left out because
    their record existed.
    """

    def __init__(
        self,
        benchmark: BenchmarkBase,
        repeats: int,
        limit: int | None = None,
        done: set[tuple[str, int]] | None = None,
    ) -> None:
        self.benchmark = benchmark
        self.repeats = repeats
        self.limit = limit
        self.done = done or set()
        self.n_tasks = 0
        self.skipped = 0
        self.exhausted = False

    def expected_items(self) -> int | None:
        """Items to run, from the benchmark's size, for progress display; ``None`` if the size is unknown.

        Exact without ``limit``; with one it assumes finished items lie within the limit (an estimate).
        """
        size = self.benchmark.size()
        if size is None:
            return None
        if self.limit is not None:
            size = min(size, self.limit)
        finished = sum(1 for _, repeat in self.done if repeat < self.repeats)
        return max(size * self.repeats - finished, 0)

    def __iter__(self) -> Iterator[WorkItem]:
        for task in self.benchmark:
            if self.limit is not None and self.n_tasks >= self.limit:
                break
            self.n_tasks += 1
            key = encode_key(task.id)
            for repeat in range(self.repeats):
                if (key, repeat) in self.done:
                    self.skipped += 1
                    continue
                yield WorkItem(task, repeat)
        self.exhausted = True
