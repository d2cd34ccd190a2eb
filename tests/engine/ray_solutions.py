"""Solutions for the Ray tests, in a module of their own so that Ray workers (and CLI subprocesses) import them.

The factories count executions: each call appends ``<task id> <repeat> <attempt>`` to the file ``log`` (one short
``write`` in append mode, so lines of concurrent workers do not interleave).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from runner import SolutionContext, Task, solution_factory
from runner.solutions.calculator import calculator


def _count(log: str, context: SolutionContext) -> None:
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(f"{context.task_id} {context.repeat} {context.attempt}\n")


def task_index(task: Task) -> int:
    """The number in a toy task's id (``toy-007`` -> 7)."""
    return task_index_of(task.id)


async def seed_solve(task: Task) -> float:
    """The seed's ``async def solve(task)`` shape, answering the toy benchmark."""
    return calculator(task)


@solution_factory
def faulty(log: str) -> Callable[[Task, SolutionContext], Any]:
    """Calculator with faults by task index: 0, 4, 8 kill their worker process on attempt 1; 5 kills it on every
    attempt; 3 raises ValueError; 7 sleeps past any short timeout; the rest answer."""

    def solve(task: Task, context: SolutionContext) -> float:
        _count(log, context)
        index = task_index(task)
        if (index in (0, 4, 8) and context.attempt == 1) or index == 5:
            os._exit(17)
        if index == 3:
            raise ValueError("task 3 always fails")
        if index == 7:
            time.sleep(30)
        return calculator(task)

    return solve


@solution_factory
def slow_counted(log: str) -> Callable[[Task, SolutionContext], Any]:
    """Calculator that takes 0.05 s per task and counts its executions (for the driver-kill test)."""

    async def solve(task: Task, context: SolutionContext) -> float:
        _count(log, context)
        await asyncio.sleep(0.05)
        return calculator(task)

    return solve


@solution_factory
def flaky() -> Callable[[Task], Any]:
    """Calculator that raises on the first call for each task and answers the second, but only if the task it gets
    is pristine: it marks every task it sees (``task.metadata``), so a retry on an already-marked copy answers
    wrong."""
    seen: set[str] = set()

    def solve(task: Task) -> Any:
        if task.metadata is not None:
            return "dirty task"
        task.metadata = {"seen": True}
        if task.id not in seen:
            seen.add(task.id)
            raise RuntimeError("first call fails")
        return calculator(task)

    return solve


class Quit(BaseException):
    """A BaseException subclass of some library."""


@solution_factory
def misbehaving(block_s: float = 3.0) -> Callable[[Task, SolutionContext], Any]:
    """An ``async def`` calculator that leaves in every way but a return, by task index: 1 ``sys.exit(2)``, 2
    ``exit()``, 3 ``GeneratorExit``, 4 a ``CancelledError`` of its own, 5 a ``BaseException`` subclass; 6 blocks its
    event loop for ``block_s`` seconds (``time.sleep``), 7 blocks it for good; the others answer after 0.2 s."""

    async def solve(task: Task, context: SolutionContext) -> float:
        index = task_index(task)
        if index == 1:
            sys.exit(2)
        if index == 2:
            exit()
        if index == 3:
            raise GeneratorExit
        if index == 4:
            raise asyncio.CancelledError
        if index == 5:
            raise Quit("quit")
        if index == 6:
            time.sleep(block_s)
        if index == 7:
            time.sleep(3600)
        await asyncio.sleep(0.2)
        return calculator(task)

    return solve


@solution_factory
def memory_hog(log: str, size: int = 1 << 30) -> Callable[[Task, SolutionContext], Any]:
    """Calculator whose task 2 fills ``size`` bytes of memory and holds them (on its first attempt); counts its
    executions."""

    async def solve(task: Task, context: SolutionContext) -> float:
        _count(log, context)
        if task_index(task) == 2:
            hog = b"x" * size
            await asyncio.sleep(30)
            return len(hog)
        await asyncio.sleep(0.05)
        return calculator(task)

    return solve


def task_index_of(task_id: str) -> int:
    """The number in a toy task id (``toy-007`` -> 7)."""
    return int(task_id.rsplit("-", 1)[1])


NODE_VARIABLE = "RUNNER_TEST_NODE"
"""The environment variable that names a test node (set on its ``ray start``; its workers inherit it)."""


@solution_factory
def node_bound(log: str, slow_node: str = "", slow_s: float = 0.0, fast_s: float = 0.05,
               model: str | None = None) -> Callable[[Task, SolutionContext], Any]:
    """Calculator that takes ``slow_s`` seconds on the node named ``slow_node`` (:data:`NODE_VARIABLE`) and
    ``fast_s`` elsewhere; each call appends ``<task id> <repeat> <attempt> <node>`` to ``log``. ``model`` (a
    matrix cell's) is taken and not used."""

    async def solve(task: Task, context: SolutionContext) -> float:
        node = os.environ.get(NODE_VARIABLE, "?")
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{context.task_id} {context.repeat} {context.attempt} {node}\n")
        await asyncio.sleep(slow_s if node == slow_node else fast_s)
        return calculator(task)

    return solve


class Holder:
    """Another job's actor: it holds the resources it was created with until it is killed."""

    def ready(self) -> bool:
        return True
