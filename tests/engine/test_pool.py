"""The worker pool without Ray: bookkeeping, the dispatch window and batch sizing, driven by fake workers.

``FakeBackend`` stands in for the cluster (Ray actors in production, tested in ``test_ray_evaluator.py``): its
workers are coroutines on this event loop that answer each call from a script, so deaths can be placed in every
state of a worker's life and the pool's answer checked exactly.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from runner.core.config import WorkerSpec
from runner.core.errors import ConfigError, RunStopped
from runner.core.record import ErrorInfo
from runner.core.task import Task
from runner.engine.plan import Plan, WorkItem
from runner.engine.pool import (
    MAX_BATCH,
    Ack,
    DispatchWindow,
    PoolWorker,
    Throughput,
    WorkerBook,
    WorkerBuildFailed,
    WorkerLost,
    WorkerPool,
    WorkerState,
    batch_size,
)
from runner.engine.progress import Progress


def items(n: int) -> list[WorkItem]:
    return [WorkItem(Task(id=f"t{i}"), 0, i) for i in range(n)]


class FakeBackend:
    """Workers that answer on this event loop. ``dies(worker number, task id, attempt)`` decides whether a worker dies
    while running an item (the whole call is lost with it); ``describe_fails`` decides whether starting worker
    number N dies (``"lost"``) or cannot build the solution (``"build"``); ``ack(task id)`` is an item's
    acknowledgement (default: ok)."""

    worker_label = "fake worker"

    def __init__(self, dies: Callable[[int, str, int], bool] = lambda *_: False,
                 describe_fails: Callable[[int], str | None] = lambda _: None,
                 ack: Callable[[str], Ack] = lambda _: ("ok", False, 0.001, None)) -> None:
        self.dies = dies
        self.ack = ack
        self.describe_fails = describe_fails
        self.started = 0
        self.killed: list[int] = []
        self.executed: list[tuple[int, str, int]] = []
        self.batches: list[int] = []

    def start_worker(self) -> int:
        self.started += 1
        return self.started - 1

    async def describe(self, handle: int) -> dict[str, Any]:
        await asyncio.sleep(0)
        failure = self.describe_fails(handle)
        if failure == "lost":
            raise WorkerLost("the process died")
        if failure == "build":
            raise WorkerBuildFailed("ValueError: no model")
        return {"handle": handle}

    async def run(self, handle: int, batch: list[tuple[WorkItem, int]]) -> tuple[list[Ack], float]:
        await asyncio.sleep(0)
        self.batches.append(len(batch))
        acks = []
        for item, attempt in batch:
            if handle in self.killed:
                raise WorkerLost("killed")
            self.executed.append((handle, item.task.id, attempt))
            if self.dies(handle, item.task.id, attempt):
                raise WorkerLost(f"worker {handle} died running {item.task.id}")
            acks.append(self.ack(item.task.id))
        return acks, 0.001 * len(batch)

    def kill(self, handle: int) -> None:
        self.killed.append(handle)


async def run_pool(backend: FakeBackend, plan: list[WorkItem], *, size: int = 2, concurrency: int = 1,
                   max_attempts: int = 3) -> tuple[WorkerPool, Progress, list[tuple[str, int]]]:
    given_up: list[tuple[str, int]] = []

    async def give_up(item: WorkItem, attempt: int, exc: BaseException) -> str:
        given_up.append((item.task.id, attempt))
        return "error"

    pool = WorkerPool(backend, WorkerSpec(max_concurrency=concurrency, max_attempts=max_attempts), size, give_up)
    progress = Progress(len(plan), bar=False)
    try:
        await pool.start("fake")
        await pool.run(iter(plan), progress)
    finally:
        pool.close()
    return pool, progress, given_up


async def test_every_item_runs_once_on_healthy_workers() -> None:
    backend = FakeBackend()
    pool, progress, given_up = await run_pool(backend, items(50), concurrency=4)
    assert Counter(task for _, task, _ in backend.executed) == {f"t{i}": 1 for i in range(50)}
    assert (progress.done, progress.errors, given_up, pool.book.deaths) == (50, 0, [], 0)
    assert sorted(d["handle"] for d in pool.book.descriptions) == [0, 1]
    assert sorted(backend.killed) == [0, 1]       # close() stops every worker


async def test_a_worker_that_dies_while_pending_is_replaced_and_the_run_goes_on() -> None:
    backend = FakeBackend(describe_fails=lambda worker: "lost" if worker == 0 else None)
    pool, progress, _ = await run_pool(backend, items(10))
    assert pool.book.deaths == 1 and backend.started == 3
    assert progress.done == 10
    assert {worker for worker, _, _ in backend.executed} <= {1, 2}


async def test_a_worker_that_cannot_build_the_solution_stops_the_run_before_any_item() -> None:
    backend = FakeBackend(describe_fails=lambda worker: "build")
    with pytest.raises(ConfigError, match=r"the solution 'fake' could not be built on a fake worker \(ValueError: no model"):
        await run_pool(backend, items(3))
    assert backend.executed == []


async def test_workers_that_keep_dying_while_starting_stop_the_run() -> None:
    backend = FakeBackend(describe_fails=lambda worker: "lost")
    with pytest.raises(ConfigError, match="6 fake workers died while starting"):
        await run_pool(backend, items(3), size=2, max_attempts=3)


async def test_a_death_while_running_retries_the_call_alone_with_the_attempt_counted() -> None:
    # A worker dies once, on t3's first attempt; every item of that call is retried at attempt 2.
    backend = FakeBackend(dies=lambda worker, task, attempt: (task, attempt) == ("t3", 1))
    pool, progress, given_up = await run_pool(backend, items(12), size=2, concurrency=1)
    assert pool.book.deaths == 1 and backend.started == 3
    assert progress.done == 12 and given_up == []
    attempts = {task: attempt for _, task, attempt in backend.executed}
    assert attempts["t3"] == 2
    ok_once = [task for task, count in Counter(t for _, t, _ in backend.executed).items() if count == 1]
    assert len(ok_once) >= 12 - 4     # only the items of the lost call ran twice


async def test_an_item_that_kills_every_worker_is_given_up_after_max_attempts_and_innocents_finish() -> None:
    backend = FakeBackend(dies=lambda worker, task, attempt: task == "t5")
    pool, progress, given_up = await run_pool(backend, items(20), size=2, max_attempts=3)
    assert given_up == [("t5", 3)]
    assert pool.book.deaths == 3
    assert [attempt for _, task, attempt in backend.executed if task == "t5"] == [1, 2, 3]
    # Retries run alone, so no other item reaches its last attempt because of t5.
    assert all(attempt <= 2 for _, task, attempt in backend.executed if task != "t5")
    assert progress.done == 20


async def test_the_run_ends_only_when_items_in_flight_are_answered() -> None:
    answered = asyncio.Event()

    class Slow(FakeBackend):
        async def run(self, handle, batch):
            result = await super().run(handle, batch)
            await asyncio.sleep(0.05)
            answered.set()
            return result

    backend = Slow()
    _, progress, _ = await run_pool(backend, items(3), size=3)
    assert answered.is_set() and progress.done == 3


async def test_a_server_that_speaks_another_protocol_stops_the_pool_after_three_items() -> None:
    """Every item's ack carries a protocol error: the pool stops at the third, not after all 200."""
    error = ErrorInfo(type="ModelProtocolError", code="protocol_error",
                      message="vllm:m at http://host/v1: POST /chat/completions answered text/html: an HTML page")
    backend = FakeBackend(ack=lambda task: ("error", False, 0.001, error))
    with pytest.raises(RunStopped, match="the model server speaks another protocol: 3 items in a row failed with "
                                         "ModelProtocolError \\(vllm:m at http://host/v1: POST /chat/completions "
                                         "answered text/html"):
        await run_pool(backend, items(200), size=2)
    assert len(backend.executed) < 50 and sorted(backend.killed) == [0, 1]


def test_batch_size_is_about_target_seconds_of_work_within_bounds() -> None:
    assert batch_size(None) == 1
    assert batch_size(5.0) == 1                    # 0.5 items in 0.1 s: one per call
    assert batch_size(1000.0) == 100
    assert batch_size(1e9) == MAX_BATCH


def test_throughput_follows_changing_rates_as_a_moving_average() -> None:
    throughput = Throughput(concurrency=1)
    throughput.observe(100, 0.1)                   # 1000/s
    assert throughput.rate == pytest.approx(1000.0) and throughput.batch == 100
    throughput.observe(10, 1.0)                    # slows to 10/s: 0.7 * 1000 + 0.3 * 10
    assert throughput.rate == pytest.approx(703.0)
    for _ in range(30):
        throughput.observe(10, 1.0)
    assert throughput.rate == pytest.approx(10 + 693 * 0.7**30) and throughput.batch == 1
    throughput.observe(5, 0.0)                     # a call that took no measurable time changes nothing
    assert throughput.rate == pytest.approx(10 + 693 * 0.7**30)
    concurrent = Throughput(concurrency=8)
    concurrent.observe(2, 1.0)                     # 2 items at concurrency 8: still 8 slots' worth in 1 s
    assert concurrent.rate == pytest.approx(8.0)


def test_the_window_fills_a_worker_up_to_its_room_and_an_idle_one_takes_what_is_left() -> None:
    window = DispatchWindow(iter(items(5)), concurrency=2)
    worker = PoolWorker(handle=0, index=0, state=WorkerState.READY)
    calls = window.batches_for(worker)
    assert [len(call) for call in calls] == [1, 1, 1, 1]       # batch 1 until measured; room 2 * max(1, 2)
    worker.in_flight = 4
    assert window.batches_for(worker) == []
    assert not window.finished
    worker.in_flight = 0
    assert [len(call) for call in window.batches_for(worker)] == [1]
    assert window.finished and window.batches_for(worker) == []


def test_a_pending_or_isolated_worker_gets_nothing_and_a_retry_goes_alone_to_an_idle_worker() -> None:
    plan = items(10)
    window = DispatchWindow(iter(plan[1:]))
    busy = PoolWorker(0, 0, WorkerState.READY, in_flight=1)
    idle = PoolWorker(1, 1, WorkerState.READY)
    pending = PoolWorker(2, 2)
    window.retry(plan[0], 2)
    assert window.batches_for(pending) == []
    assert window.batches_for(busy) == []                       # retries wait: busy workers drain
    assert window.batches_for(idle) == [[(plan[0], 2)]] and idle.isolated
    assert window.batches_for(idle) == []                       # isolated until its call ends


def test_the_book_counts_one_death_per_worker_and_keeps_descriptions() -> None:
    book = WorkerBook()
    first, second = book.add("a"), book.add("b")
    assert not book.any_ready
    book.ready(first, {"host": "x"})
    assert book.any_ready and first.state is WorkerState.READY and book.descriptions == [{"host": "x"}]
    assert book.dead(second) and not book.dead(second)          # two lost calls, one death
    assert book.deaths == 1 and book.workers == [first]


def test_the_plan_does_not_consume_the_callers_done_set() -> None:
    class Three:
        name = "three"

        def __iter__(self):
            return iter([Task(id="a"), Task(id="b"), Task(id="a")])

        def size(self):
            return 3

    done = {("a", 0)}
    plan = Plan(Three(), repeats=1, done=done)
    assert [(item.task.id, item.index) for item in plan] == [("b", 1)]
    assert done == {("a", 0)} and (plan.skipped, plan.duplicate_tasks) == (1, 1)
