"""The Ray actor of a distributed run: builds its cells' solutions once, then runs batches of items through
``execute_one``.

The driver (:mod:`runner.engine.ray.executor`) creates a pool of these actors with the run's :class:`WorkerSpec`
resources. Each actor receives the run's :class:`~runner.engine.workload.WorkerSetup` (a run alone: its
:class:`~runner.engine.run_context.RunContext`, the benchmark, solution recipe and store) once, from the object store, and then only task data;
a matrix's worker receives the cells of the model it holds with that model (:meth:`EvalWorker.load`). It writes
every record itself and answers with one small acknowledgement per item.

Items run on the actor's default event loop. Two calls run in the ``control`` concurrency group, on a loop and
thread of their own, so they answer even while an item holds the default loop: :meth:`EvalWorker.describe` (the
first call, and the probe of a suspect worker) and :meth:`EvalWorker.watch`, which answers only when the actor's
:class:`~runner.engine.item.watchdog.WorkerWatch` raises an alarm (its event loop blocked past an item's limit, its
resident memory over ``--memory-limit``); the driver then kills and replaces it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ray

from runner import log
from runner.engine.item.execute import ItemResult, execute_one, worker_identity
from runner.engine.item.watchdog import Alarm, WorkerWatch
from runner.engine.plan import WorkItem
from runner.engine.pool.workers import Batch
from runner.engine.worker_cells import WorkerCells
from runner.engine.workload import WorkerSetup
from runner.serving import ReplicaSpec
from runner.traffic.control import TrafficControl, TrafficHub

_IO_THREADS = 32
CONTROL_GROUP = "control"
"""The concurrency group of the calls that must answer while items run (a loop and thread of its own)."""


class EvalWorker:
    """One worker: the cells it runs (their solutions built once), up to ``max_concurrency`` items at a time.

    Args:
        setup: what every worker gets (:class:`~runner.engine.workload.WorkerSetup`): the cells it runs from its
            start (a run alone: its one cell, whose solution :meth:`SolutionSpec.build` builds once, here), the
            replicas it keeps for its life, the traffic settings and cache. A matrix's other cells come with the
            model that runs them (:meth:`load`).
        traffic: where the run's traffic state lives (:class:`~runner.engine.ray.limiter.RemoteTraffic`: the run's
            limiter actor, found on first use); ``None``: in this process (a worker alone, in tests).
        max_concurrency: items this actor runs at the same time, across its cells.
        memory_limit: bytes of resident memory this process may use (``None``: not watched).
        log_format: structlog format for the actor's log lines (Ray forwards them to the driver).

    Raises:
        ReplicaStartError: a model the run serves could not start on this worker (the driver stops the run before it
            writes anything, with the server's own line).
        Exception: whatever building a solution raises; Ray then reports the actor's creation as failed and the
            driver stops the run with that message.
    """

    def __init__(self, setup: WorkerSetup, *, traffic: TrafficHub | None = None, max_concurrency: int,
                 memory_limit: int | None = None, log_format: log.LogFormat = "json") -> None:
        log.configure(log_format)
        runtime = ray.get_runtime_context()
        self.setup = setup
        # The model calls' limiter, budget and response cache, for the worker's life.
        self.traffic = TrafficControl(setup.settings, cache=setup.cache, hub=traffic)
        self.max_concurrency = max_concurrency
        self.memory_limit = memory_limit
        self.identity = worker_identity(node_id=runtime.get_node_id(), actor_id=runtime.get_actor_id())
        # One replica of each pinned model, on the GPUs Ray gave this worker (none: the CPU), ready before the
        # solutions are built and any item comes.
        self.cells = WorkerCells(setup, self.traffic, self.identity, gpu_ids=ray.get_gpu_ids(),
                                 label=f"worker-{runtime.get_actor_id()[:12]}", sync_in_thread=max_concurrency > 1,
                                 wrap_errors=False)
        self.cells.start()
        self._ready = False
        self._order: asyncio.Condition | None = None
        self._turn = 0
        self._alarm: concurrent.futures.Future[Alarm] = concurrent.futures.Future()

    @ray.method(concurrency_group=CONTROL_GROUP)
    async def watch(self) -> dict[str, Any]:
        """Answers when this worker must be replaced: the :class:`Alarm` its watchdog raised, as a dict."""
        alarm = await asyncio.wrap_future(self._alarm)
        return alarm.as_dict()

    def _raise(self, alarm: Alarm) -> None:
        if not self._alarm.done():
            self._alarm.set_result(alarm)

    @ray.method(concurrency_group=CONTROL_GROUP)
    async def describe(self) -> dict[str, Any]:
        """This worker's identity (host, pid, Ray node and actor ids), the resources Ray assigned to it, and the ids
        of the accelerators it may use (e.g. ``{"GPU": ["0"]}``)."""
        context = ray.get_runtime_context()
        accelerators = {name: ids for name, ids in context.get_accelerator_ids().items() if ids}
        described = {**self.identity, "resources": context.get_assigned_resources(), "accelerators": accelerators}
        statuses = self.cells.statuses()
        if statuses:
            described["replicas"] = [{"model": status.model, "state": status.state, "restarts": status.restarts}
                                     for status in statuses]
        return described

    @ray.method(concurrency_group=CONTROL_GROUP)
    def shutdown(self) -> None:
        """Stop this worker's model replicas and keep their logs in the run's ``replicas/`` (before the driver kills
        the actor; a worker killed without it still has its servers stopped, by their shepherds)."""
        self.cells.stop()

    async def load(self, model: str, cells: dict[int, Any], replicas: tuple[ReplicaSpec, ...]) -> dict[str, Any]:
        """Hold ``model`` to run ``cells`` (cell number -> a reference to its context in Ray's object store), in
        place of the model held now (:meth:`WorkerCells.load <runner.engine.worker_cells.WorkerCells.load>`): its
        replicas started, or swapped in place, and its cells' solutions built. The driver sends it only while this
        worker has nothing in flight.

        Returns:
            what the load did (its replica starts, swaps, in-process builds, seconds, an error line).
        """
        contexts = dict(zip(cells, await asyncio.gather(*cells.values())))
        return await asyncio.to_thread(self.cells.load, model, contexts, replicas)

    async def run(self, items: Batch, turn: int) -> tuple[list[ItemResult], float]:
        """Execute ``items`` (each with its attempt, and whether it went out before) concurrently: one
        acknowledgement per item, and the seconds this batch kept the worker busy (from its first item's start to
        its last item's end), from which the driver sizes batches.

        Calls start in the order the driver sent them (``turn``: 0, 1, ... per actor), whatever order Ray delivers
        them in (it does not keep it for async actors): each call's items queue for a solution slot only after the
        items of the calls before it, so the driver can tell which calls were running when a worker died
        (:func:`~runner.engine.pool.workers.running_calls`). At most ``max_concurrency`` solution calls run at a time;
        metrics and record writes of finished items overlap with them. Their model calls go through the traffic
        hub the worker was built with.

        Raises:
            StorageError: a record cannot be written (the driver stops the run; finished records stay).
            ReplicaFailed: a model replica of this worker failed past its restarts (the run stops; the same command
                resumes). While one starts again, the batch waits for it.
        """
        await self.cells.ready()
        if not self._ready:
            self._ready = True
            # One solution call at a time may run in the event loop: nothing else would run meanwhile. With more,
            # sync solutions get threads so they do not take turns. The bound holds across the worker's cells.
            self.cells.slots = asyncio.Semaphore(self.max_concurrency)
            self._order = asyncio.Condition()
            loop = asyncio.get_running_loop()
            # Record writes go through asyncio.to_thread: on an object store each is a network round trip, so give
            # them more threads than asyncio's default (CPUs + 4).
            loop.set_default_executor(ThreadPoolExecutor(max_workers=_IO_THREADS, thread_name_prefix="runner-io"))
            WorkerWatch(loop, self._raise, memory_limit=self.memory_limit).start()
        assert self._order is not None
        async with self._order:
            await self._order.wait_for(lambda: self._turn == turn)
        try:
            acks: dict[int, tuple[ItemResult, float]] = {}
            for index, (item, attempt, again) in enumerate(items):
                if again:
                    store = self.cells.site(item.cell).context.store
                    existing = await asyncio.to_thread(store.record_status, item.task.id, item.repeat)
                    if existing is not None:
                        # The previous worker wrote this record before it died: never execute an item twice.
                        acks[index] = ItemResult(item.task.id, item.repeat, existing, False, attempt, 0.0), \
                            time.perf_counter()
            # Deserialised tasks are private copies, except that repeats of one task in a batch share one object:
            # its last item takes the object itself, the others copy it first (each task copies before its first
            # await, in order, so before the last one can change it).
            last = {id(item.task): index for index, (item, _, _) in enumerate(items) if index not in acks}
            running = {index: asyncio.ensure_future(self._one(item, attempt, owned=last[id(item.task)] == index))
                       for index, (item, attempt, _) in enumerate(items) if index not in acks}
            await asyncio.sleep(0)  # each item runs up to its solution slot's queue, in order
        finally:
            async with self._order:
                self._turn += 1
                self._order.notify_all()
        for index, result in zip(running, await asyncio.gather(*running.values())):
            acks[index] = result
        done = [acks[index] for index in range(len(items))]
        busy = max(end for _, end in done) - min(end - ack.seconds for ack, end in done)
        return [ack for ack, _ in done], busy

    async def _one(self, item: WorkItem, attempt: int, owned: bool) -> tuple[ItemResult, float]:
        result = await execute_one(item, self.cells.site(item.cell), attempt=attempt, owned=owned)
        return result, time.perf_counter()
