"""The Ray actor of a distributed run: builds the solution once, then runs batches of items through ``execute_one``.

The driver (:mod:`runner.engine.ray_executor`) creates a pool of these actors with the run's :class:`WorkerSpec`
resources. Each actor receives the run's :class:`RunContext` (benchmark, solution recipe, store) once, from the
object store, and then only task data. It writes every record itself and answers with one small acknowledgement
per item.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ray

from runner import log
from runner.core.task import Task
from runner.engine.context import RunContext
from runner.engine.execute import execute_one, stored_status, worker_identity

# One acknowledgement per item: (record status, whether it was a duplicate (ItemResult.duplicate), seconds of the item).
Ack = tuple[str, bool, float]
# One item as the driver ships it: (task, 0-based repeat, attempt, the task's 0-based position in the benchmark).
ItemData = tuple[Task, int, int, int]
_IO_THREADS = 32


class EvalWorker:
    """One worker: a solution built once, running up to ``max_concurrency`` items at a time.

    Args:
        context: the run's benchmark, solution recipe (:meth:`SolutionSpec.build` is called once, here), store
            (every worker writes its own records), run id, timeout (seconds) and ``retry_errors``.
        max_concurrency: items this actor runs at the same time.
        log_format: structlog format for the actor's log lines (Ray forwards them to the driver).

    Raises:
        Exception: whatever building the solution raises; Ray then reports the actor's creation as failed and the
            driver stops the run with that message.
    """

    def __init__(self, context: RunContext, *, max_concurrency: int, log_format: log.LogFormat = "json") -> None:
        log.configure(log_format)
        self.solution = context.solution.build(context.benchmark)
        self.store = context.store
        self.run_id = context.run_id
        self.timeout = context.timeout
        self.retry_errors = context.retry_errors
        self.max_concurrency = max_concurrency
        context = ray.get_runtime_context()
        self.identity = worker_identity(node_id=context.get_node_id(), actor_id=context.get_actor_id())
        self._slots: asyncio.Semaphore | None = None

    async def describe(self) -> dict[str, Any]:
        """This worker's identity (host, pid, Ray node and actor ids), the resources Ray assigned to it, and the ids
        of the accelerators it may use (e.g. ``{"GPU": ["0"]}``)."""
        context = ray.get_runtime_context()
        accelerators = {name: ids for name, ids in context.get_accelerator_ids().items() if ids}
        return {**self.identity, "resources": context.get_assigned_resources(), "accelerators": accelerators}

    async def run(self, items: list[ItemData]) -> tuple[list[Ack], float]:
        """Execute ``items`` concurrently: one acknowledgement per item, and the seconds this batch kept the worker
        busy (from its first item's start to its last item's end), from which the driver sizes batches.

        At most ``max_concurrency`` solution calls run at a time; metrics and record writes of finished items overlap
        with them.

        Raises:
            StorageError: a record cannot be written (the driver stops the run; finished records stay).
        """
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrency)
            # Record writes go through asyncio.to_thread: on an object store each is a network round trip, so give
            # them more threads than asyncio's default (CPUs + 4).
            asyncio.get_running_loop().set_default_executor(
                ThreadPoolExecutor(max_workers=_IO_THREADS, thread_name_prefix="runner-io")
            )
        if len(items) == 1:
            done = [await self._one(*items[0], owned=True)]
        else:
            # Deserialised tasks are private copies, except that repeats of one task in a batch share one object:
            # its last item takes the object itself, the others copy it first (each coroutine copies before its
            # first await, in order, so before the last one can change it).
            last = {id(task): index for index, (task, *_) in enumerate(items)}
            done = await asyncio.gather(
                *(self._one(*item, owned=last[id(item[0])] == index) for index, item in enumerate(items))
            )
        busy = max(end for _, end in done) - min(end - ack[2] for ack, end in done)
        return [ack for ack, _ in done], busy

    async def _one(self, task: Task, repeat: int, attempt: int, task_index: int, owned: bool) -> tuple[Ack, float]:
        assert self._slots is not None
        if attempt > 1:
            existing = await asyncio.to_thread(stored_status, self.store, task.id, repeat)
            if existing is not None:
                # The previous worker wrote this record before it died: never execute an item twice.
                return (existing, False, 0.0), time.perf_counter()
        result = await execute_one(
            task,
            repeat,
            self.solution,
            self.store,
            run_id=self.run_id,
            task_index=task_index,
            timeout=self.timeout,
            attempt=attempt,
            retry_errors=self.retry_errors,
            worker=self.identity,
            # One solution call at a time may run in the event loop: nothing else would run meanwhile. With more,
            # sync solutions get threads so they do not take turns.
            sync_in_thread=self.max_concurrency > 1,
            slots=self._slots,
            owned=owned,
        )
        return (result.status, result.duplicate, result.seconds), time.perf_counter()
