"""Solutions and benchmarks used by tests that run ``python -m runner`` in a subprocess (importable by path)."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator

from runner import BenchmarkBase, Task
from runner.solutions.calculator import calculator
from runner.benchmarks.toy import NumericMatch

CALLS_ENV = "RUNNER_TEST_CALLS"
DELAY_ENV = "RUNNER_TEST_DELAY"


def counting_calculator(task: Task) -> float:
    """The calculator, appending ``<task id> <pid>`` to the file named by ``$RUNNER_TEST_CALLS`` on every call
    (flushed to disk before answering) and sleeping ``$RUNNER_TEST_DELAY`` seconds, so tests can count executions
    and kill a run midway."""
    path = os.environ[CALLS_ENV]
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{task.id} {os.getpid()}\n")
        handle.flush()
        os.fsync(handle.fileno())
    time.sleep(float(os.environ.get(DELAY_ENV, "0")))
    return calculator(task)


class SquaresBenchmark(BenchmarkBase):
    """``n`` tasks "What is i * i?" with no ``__len__`` (the plan counts them)."""

    def __init__(self, n: int = 5) -> None:
        super().__init__(name="squares", description="squares")
        self.n = n

    def __iter__(self) -> Iterator[Task]:
        for i in range(self.n):
            yield Task(id=f"sq/{i}", input=f"What is {i} * {i}?", ground_truth=i * i, metrics=[NumericMatch(i * i)],
                       tags={"category": "even" if i % 2 == 0 else "odd"})


def flaky_calculator(task: Task) -> float:
    """The calculator, raising on every task whose id ends in 3 while ``$RUNNER_TEST_FAIL`` is set (an outage)."""
    if os.environ.get("RUNNER_TEST_FAIL") and task.id.endswith("3"):
        raise ConnectionError("model server unavailable")
    return calculator(task)


STUBBORN_TRIES: Counter[str] = Counter()
"""Tries of :func:`stubborn_calculator` per task id in this process (a test clears it)."""


def stubborn_calculator(task: Task) -> float:
    """The calculator, except on tasks whose id ends in 1: their first two tries raise (counted in this process) and
    the third answers one too many, as an agent whose retried answers are worse."""
    if not task.id.endswith("1"):
        return calculator(task)
    STUBBORN_TRIES[task.id] += 1
    if STUBBORN_TRIES[task.id] <= 2:
        raise ConnectionError(f"try {STUBBORN_TRIES[task.id]} failed")
    return calculator(task) + 1


class IdsBenchmark(BenchmarkBase):
    """Tasks "What is i * i?" whose ids are the comma-separated ``ids`` (``-B ids=a,b,a``): a custom benchmark with
    a duplicated or empty id, as a user might write by mistake."""

    def __init__(self, ids: str = "a,b,c") -> None:
        super().__init__(name="ids", description="ids")
        self.ids = ids.split(",")

    def __iter__(self) -> Iterator[Task]:
        for i, task_id in enumerate(self.ids):
            yield Task(id=task_id, input=f"What is {i} * {i}?", ground_truth=i * i, metrics=[NumericMatch(i * i)])


class BrokenAgent:
    """A solution class whose constructor raises, as one that needs hardware this machine lacks would."""

    def __init__(self) -> None:
        raise RuntimeError("no GPU on this machine")

    def __call__(self, task: Task) -> float:
        return calculator(task)
