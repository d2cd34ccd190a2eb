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
import structlog

from runner.core.config import WorkerSpec
from runner.core.errors import ConfigError, ProtocolStop, ResourcesBusy, WorkersLost
from runner.core.record import ErrorInfo
from runner.core.task import Task
from runner.engine.plan import Plan, WorkItem
from runner.engine.pool.dispatch import MAX_BATCH, DispatchWindow, Throughput, batch_size
from runner.engine.item.execute import Fault, ItemResult
from runner.engine.pool import pool as pool_module
from runner.engine.workload import Workload
from runner.engine.pool.pool import WorkerBuildFailed, WorkerLost, WorkerPool
from runner.engine.pool.workers import Call, PoolWorker, WorkerBook, WorkerState, running_calls
from runner.engine.progress import Progress


def items(n: int) -> list[WorkItem]:
    return [WorkItem(Task(id=f"t{i}"), 0, i) for i in range(n)]


class FakeBackend:
    """Workers that answer on this event loop, each running ``concurrency`` items at a time in the order its calls
    came (as a Ray actor does).

    ``dies(worker number, task id, attempt)`` decides whether a worker dies while running an item (every call it
    holds is lost with it); ``describe_fails`` whether starting worker number N dies (``"lost"``) or cannot build
    the solution (``"build"``); ``node_of`` puts worker N on a node; ``hold(task id, attempt)`` returns an event an
    item waits for before it answers (a long item); an item that ``linger(task id, attempt)`` names gives its slot
    back and then waits until its worker dies (a record write still going on when the next item kills the worker).
    ``ack(task id)`` is an item's acknowledgement (default: ok). :meth:`kill_node` kills a node's workers; the cluster reports it dead (:meth:`node_alive`) only when
    ``reports_dead`` says so. :meth:`alarm` makes a worker's watch answer.
    """

    worker_label = "fake worker"

    def __init__(self, dies: Callable[[int, str, int], bool] = lambda *_: False,
                 describe_fails: Callable[[int], str | None] = lambda _: None, *,
                 node_of: Callable[[int], str] = lambda worker: "n0", concurrency: int = 1,
                 hold: Callable[[str, int], asyncio.Event | None] = lambda *_: None,
                 linger: Callable[[str, int], bool] = lambda *_: False,
                 ack: Callable[[str], ItemResult] = lambda task: ItemResult(task, 0, "ok", True, 1, 0.001)) -> None:
        self.dies = dies
        self.linger = linger
        self.ack = ack
        self.describe_fails = describe_fails
        self.node_of = node_of
        self.concurrency = concurrency
        self.hold = hold
        self.started = 0
        self.killed: list[int] = []
        self.dead: set[int] = set()
        self.dead_nodes: set[str] = set()
        self.reports_dead = False
        self.executed: list[tuple[int, str, int]] = []
        self.recorded: set[str] = set()
        self.batches: list[int] = []
        self.sent: list[tuple[int, list[str]]] = []
        self.probes: list[int] = []
        self._slots: dict[int, asyncio.Semaphore] = {}
        self._alarms: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.unplaced: set[int] = set()
        self.wants: dict[str, float] = {"GPU": 1.0}  # what :meth:`waiting` says each worker asks for
        self.free: dict[str, float] = {"GPU": 0.0}  # and what is free

    def start_worker(self) -> int:
        self.started += 1
        return self.started - 1

    def _check(self, handle: int) -> None:
        if handle in self.dead or self.node_of(handle) in self.dead_nodes:
            raise WorkerLost(f"worker {handle} is dead")

    def _alarm_future(self, handle: int) -> asyncio.Future[dict[str, Any]]:
        return self._alarms.setdefault(handle, asyncio.get_running_loop().create_future())

    def _die(self, handle: int) -> None:
        self.dead.add(handle)
        future = self._alarm_future(handle)
        if not future.done():
            future.set_result({"died": f"worker {handle} died"})

    async def describe(self, handle: int) -> dict[str, Any]:
        await asyncio.sleep(0)
        while handle in self.unplaced:  # waits for resources that never free up
            await asyncio.sleep(0.01)
        if handle in self._slots:
            self.probes.append(handle)
        self._check(handle)
        failure = self.describe_fails(handle)
        if failure == "lost":
            self._die(handle)
            raise WorkerLost("the process died")
        if failure == "build":
            raise WorkerBuildFailed("ValueError: no model")
        self._slots.setdefault(handle, asyncio.Semaphore(self.concurrency))
        return {"handle": handle, "node_id": self.node_of(handle), "host": "fake", "pid": 1000 + handle}

    async def run(self, handle: int, batch: list[tuple[WorkItem, int, bool]]) -> tuple[list[ItemResult], float]:
        self.sent.append((handle, [item.task.id for item, _, _ in batch]))
        await asyncio.sleep(0)
        self.batches.append(len(batch))
        acks = []
        for item, attempt, again in batch:
            async with self._slots[handle]:
                self._check(handle)
                if again and item.task.id in self.recorded:
                    acks.append(ItemResult(item.task.id, item.repeat, "ok", False, attempt, 0.0))
                    continue
                self.executed.append((handle, item.task.id, attempt))
                event = self.hold(item.task.id, attempt)
                if event is not None:
                    await event.wait()
                self._check(handle)
                if self.dies(handle, item.task.id, attempt):
                    self._die(handle)
                    raise WorkerLost(f"worker {handle} died running {item.task.id}")
            if self.linger(item.task.id, attempt):
                while handle not in self.dead:
                    await asyncio.sleep(0.001)
                raise WorkerLost(f"worker {handle} died while {item.task.id} was being written")
            self.recorded.add(item.task.id)
            acks.append(self.ack(item.task.id))
        return acks, 0.001 * len(batch)

    async def watch(self, handle: int) -> dict[str, Any]:
        answer = await self._alarm_future(handle)
        if "died" in answer:
            raise WorkerLost(answer["died"])
        return answer

    def alarm(self, handle: int, **alarm: Any) -> None:
        self._alarm_future(handle).set_result(alarm)

    def kill_node(self, node: str) -> None:
        """The node's workers die: a call fails when it next runs; watches fail once the cluster reports it."""
        self.dead_nodes.add(node)
        if self.reports_dead:
            for handle, future in self._alarms.items():
                if self.node_of(handle) == node and not future.done():
                    future.set_result({"died": f"node {node} died"})

    def node_alive(self, node: str) -> bool | None:
        return not (self.reports_dead and node in self.dead_nodes)

    def waiting(self, handles: list[int]) -> dict[str, Any]:
        """Workers ``unplaced`` say they wait for resources (a GPU another job holds)."""
        return {"unplaced": sum(1 for handle in handles if handle in self.unplaced), "wants": self.wants,
                "free": self.free}

    def release(self, handles: list[int]) -> None:
        self.released = list(handles)

    def kill(self, handle: int) -> None:
        self.killed.append(handle)
        self._die(handle)


async def run_pool(backend: FakeBackend, plan: list[WorkItem], *, size: int = 2, concurrency: int = 1,
                   max_attempts: int = 3, progress: Progress | None = None,
                   placement_timeout: float | None = 900.0) -> tuple[WorkerPool, Progress,
                                                                     list[tuple[str, int, Fault]]]:
    recorded: list[tuple[str, int, Fault]] = []

    async def record(item: WorkItem, attempt: int, fault: Fault) -> str:
        recorded.append((item.task.id, attempt, fault))
        backend.recorded.add(item.task.id)
        return fault.status

    spec = WorkerSpec(max_concurrency=concurrency, max_attempts=max_attempts, placement_timeout=placement_timeout)
    pool = WorkerPool(backend, spec, size, record)
    progress = progress or Progress(len(plan), bar=False)
    try:
        await pool.start("fake")
        await pool.run(Workload.single(None, progress, iter(plan)))  # type: ignore[arg-type]
    finally:
        pool.close()
    return pool, progress, recorded


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


async def test_a_death_charges_the_running_call_and_requeues_the_calls_queued_behind_it() -> None:
    # A worker dies once, on t3's first attempt: t3 runs again at attempt 2; nothing else runs twice, and every
    # other item keeps attempt 1 (those queued behind t3 had not started; those in its call had written records).
    backend = FakeBackend(dies=lambda worker, task, attempt: (task, attempt) == ("t3", 1))
    pool, progress, recorded = await run_pool(backend, items(12), size=2, concurrency=1)
    assert pool.book.deaths == 1 and backend.started == 3
    assert progress.done == 12 and recorded == []
    assert [attempt for _, task, attempt in backend.executed if task == "t3"] == [1, 2]
    others = [(task, attempt) for _, task, attempt in backend.executed if task != "t3"]
    assert sorted(others) == sorted((f"t{i}", 1) for i in range(12) if i != 3)


async def test_an_item_that_kills_every_worker_is_given_up_after_max_attempts_and_innocents_finish() -> None:
    backend = FakeBackend(dies=lambda worker, task, attempt: task == "t5")
    pool, progress, recorded = await run_pool(backend, items(20), size=2, max_attempts=3)
    assert [(task, attempt, fault.error_type, fault.status) for task, attempt, fault in recorded] == [
        ("t5", 3, "WorkerDied", "error")]
    assert recorded[0][2].message.startswith("its worker died during each of 3 attempts (last: worker ")
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
    backend = FakeBackend(ack=lambda task: ItemResult(task, 0, "error", True, 1, 0.001, error))
    with pytest.raises(ProtocolStop, match="the model server speaks another protocol: 3 items in a row failed with "
                                         "ModelProtocolError \\(vllm:m at http://host/v1: POST /chat/completions "
                                         "answered text/html"):
        await run_pool(backend, items(200), size=2)
    assert len(backend.executed) < 50 and sorted(backend.killed) == [0, 1]


async def until(condition: Callable[[], bool]) -> None:
    """Wait (on this event loop) until ``condition()`` holds, and a little more for answers to be accounted for."""
    while not condition():
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.02)


@pytest.mark.parametrize("reports_dead", [False, True], ids=["node-not-reported-yet", "node-reported-dead"])
async def test_node_loss_retries_only_on_workers_that_answered_and_charges_only_the_running_item(
        reports_dead: bool) -> None:
    """Workers 0-2 on node a, 3 and the replacements on node b. t0 runs long on worker 0 (t1 queued behind it);
    workers 1 and 2 finished their items and wait. Node a dies: its idle workers look ready to a driver that has not
    heard, but t0 must not be sent to them (the issue's WorkerDied at attempt 3 after one real execution)."""
    release = asyncio.Event()
    backend = FakeBackend(node_of=lambda worker: "a" if worker < 3 else "b",
                          hold=lambda task, attempt: release if (task, attempt) == ("t0", 1) else None)
    backend.reports_dead = reports_dead

    async def kill_node_a() -> None:
        await until(lambda: len({task for _, task, _ in backend.executed}) == 4)   # t0 running; t2, t3, t4 done
        backend.kill_node("a")
        backend.sent_before_kill = len(backend.sent)
        release.set()

    killer = asyncio.ensure_future(kill_node_a())
    with structlog.testing.capture_logs() as logs:
        pool, progress, recorded = await run_pool(backend, items(5), size=4)
    await killer
    runs = [(worker, attempt) for worker, task, attempt in backend.executed if task == "t0"]
    assert runs[0] == (0, 1) and len(runs) == 2
    assert runs[1][1] == 2 and backend.node_of(runs[1][0]) == "b"
    assert [(backend.node_of(w), a) for w, task, a in backend.executed if task == "t1"] == [("b", 1)]
    assert all(backend.node_of(worker) == "b" for worker, _ in backend.sent[backend.sent_before_kill:])
    assert recorded == [] and progress.done == 5 and progress.errors == 0
    assert pool.book.deaths == 3
    events = [entry["event"] for entry in logs]
    if reports_dead:
        assert "node.lost" in events and backend.probes == []
    else:
        assert "worker.suspect" in events and sorted(backend.probes) == [1, 2]


async def test_an_alarm_records_the_blamed_item_and_runs_the_others_again_without_charging_them() -> None:
    """Worker 0 runs t0 and t1 at once; its loop is declared blocked by t0: t0 gets the alarm's record, t1 runs
    again at attempt 1 on another worker, worker 0 is replaced; nothing falls under suspicion."""
    never, held = asyncio.Event(), set()

    def hold(task: str, attempt: int) -> asyncio.Event | None:
        """t0 and t1 hang the first time they run."""
        if task not in ("t0", "t1") or task in held:
            return None
        held.add(task)
        return never

    backend = FakeBackend(node_of=lambda worker: f"n{worker}", concurrency=2, hold=hold)
    message = "the event loop was blocked for 2.5 s by task 't0' (repeat 0) in its solution"

    async def block() -> None:
        await until(lambda: {(w, t) for w, t, _ in backend.executed} >= {(0, "t0"), (0, "t1")})
        backend.alarm(0, kind="blocked", status="timeout", error_type="EventLoopBlocked", message=message,
                      task_id="t0", repeat=0)

    blocker = asyncio.ensure_future(block())
    pool, progress, recorded = await run_pool(backend, items(6), size=2, concurrency=2)
    await blocker
    assert recorded == [("t0", 1, Fault("timeout", "EventLoopBlocked", message,
                                        {"host": "fake", "pid": 1000, "node_id": "n0"}))]
    assert [(worker, attempt) for worker, task, attempt in backend.executed if task == "t1"][0] == (0, 1)
    assert [attempt for worker, task, attempt in backend.executed if task == "t1"] == [1, 1]
    assert [task for _, task, _ in backend.executed].count("t0") == 1
    assert 0 in backend.killed and pool.book.deaths == 1 and backend.probes == []
    assert (progress.done, progress.errors) == (6, 1)


async def test_an_alarm_that_blames_no_single_item_counts_as_a_death() -> None:
    never = asyncio.Event()
    backend = FakeBackend(node_of=lambda worker: f"n{worker}",
                          hold=lambda task, attempt: never if (task, attempt) == ("t0", 1) else None)

    async def overrun() -> None:
        await until(lambda: (0, "t0", 1) in backend.executed)
        backend.alarm(0, kind="memory", status="error", error_type="MemoryLimitExceeded",
                      message="the worker's resident memory reached 900 MiB with 2 items running", task_id=None,
                      repeat=None)

    watcher = asyncio.ensure_future(overrun())
    _, progress, recorded = await run_pool(backend, items(4), size=2)
    await watcher
    assert recorded == []
    assert [attempt for _, task, attempt in backend.executed if task == "t0"] == [1, 2]
    assert progress.done == 4


async def test_an_item_queued_on_a_dying_worker_twice_is_charged_the_second_time() -> None:
    """x kills every worker it runs on, but twice an item sent before it (b0, then b1) is still writing its record
    on that worker: by its place in the queue x looks queued. The first time it is requeued uncharged; the second
    time it is charged, and from then on it runs alone until it is given up."""
    backend = FakeBackend(dies=lambda worker, task, attempt: task == "x",
                          linger=lambda task, attempt: task in ("b0", "b1") and attempt == 1)
    plan = [WorkItem(Task(id=task), 0, index) for index, task in enumerate(["b0", "x", "b1", "c"])]
    _, progress, recorded = await run_pool(backend, plan, size=2, max_attempts=3)
    assert [attempt for _, task, attempt in backend.executed if task == "x"] == [1, 1, 2, 3]
    assert [(task, attempt, fault.error_type) for task, attempt, fault in recorded] == [("x", 3, "WorkerDied")]
    assert progress.done == 4


async def test_the_driver_knows_what_is_in_flight_and_since_when() -> None:
    """What the heartbeat reports: every item sent and not answered (t0 running, t1 queued behind it on the same
    worker), the oldest first."""
    release = asyncio.Event()
    backend = FakeBackend(hold=lambda task, attempt: release if task == "t0" else None)
    progress = Progress(3, bar=False)
    seen: list[dict[str, Any]] = []

    async def look() -> None:
        await until(lambda: progress.done == 1)
        seen.append(progress.heartbeat())
        release.set()

    looker = asyncio.ensure_future(look())
    await run_pool(backend, items(3), size=2, progress=progress)
    await looker
    assert (seen[0]["in_flight"], seen[0]["oldest_task_id"], seen[0]["done"]) == (2, "t0", 1)
    assert progress.heartbeat()["in_flight"] == 0


async def test_workers_waiting_for_busy_resources_say_so_and_stop_the_run_past_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another job holds the GPU every worker asks for: the driver says what they wait for every WAIT_LOG_S, and
    past --placement-timeout with none running the run stops before writing anything (exit 2); with no bound it
    waits on (and says so)."""
    monkeypatch.setattr(pool_module, "WAIT_LOG_S", 0.05)
    backend = FakeBackend()
    backend.unplaced = {0, 1}
    with structlog.testing.capture_logs() as logs, pytest.raises(ResourcesBusy) as stopped:
        await run_pool(backend, items(3), placement_timeout=0.3)
    assert str(stopped.value) == (
        "no fake worker got the resources it asks for (GPU=1) within --placement-timeout 0.3 s; free now: GPU=0: "
        "other jobs or runs hold them, or no node has them yet; nothing was written; run the same command once they "
        "are free, lower the spec, or raise --placement-timeout (0: no bound)")
    waiting = [entry for entry in logs if entry["event"] == "pool.waiting"]
    assert len(waiting) >= 4 and backend.executed == []
    assert waiting[0]["detail"] == ("2 fake workers wait to start (2 of them for resources: each asks for GPU=1; "
                                    "free now: GPU=0)")
    assert (waiting[0]["waiting"], waiting[0]["unplaced"], waiting[0]["running"]) == (2, 2, 0)

    backend = FakeBackend()
    backend.unplaced = {0, 1}
    pool = WorkerPool(backend, WorkerSpec(placement_timeout=None), 2, record=None)  # type: ignore[arg-type]
    with structlog.testing.capture_logs() as logs:
        starting = asyncio.ensure_future(pool.start("fake"))
        await asyncio.sleep(0.4)
        assert not starting.done()
        backend.unplaced.clear()  # the other job lets go
        await asyncio.wait_for(starting, 5)
    pool.close()
    assert len([entry for entry in logs if entry["event"] == "pool.waiting"]) >= 4


async def test_the_memory_workers_wait_for_is_printed_as_written_and_what_is_free_in_gib(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--memory 4TiB``: the line says ``memory=4TiB``, not ``memory=4.39805e+12``; the free memory Ray reports (a
    byte count of no unit) in GiB."""
    monkeypatch.setattr(pool_module, "WAIT_LOG_S", 0.05)
    backend = FakeBackend()
    backend.unplaced = {0, 1}
    backend.wants = {"CPU": 1.0, "memory": float(WorkerSpec(memory="4TiB").memory)}
    backend.free = {"CPU": 1.0, "memory": 12345678901.0}
    with structlog.testing.capture_logs() as logs, pytest.raises(ResourcesBusy) as stopped:
        await run_pool(backend, items(1), placement_timeout=0.2)
    assert "(CPU=1, memory=4TiB) within --placement-timeout 0.2 s; free now: CPU=1, memory=11.50GiB:" in str(
        stopped.value)
    waiting = [entry for entry in logs if entry["event"] == "pool.waiting"]
    assert "each asks for CPU=1, memory=4TiB; free now: CPU=1, memory=11.50GiB" in waiting[0]["detail"]
    assert waiting[0]["wants"]["memory"] == 4 * 2**40  # the event's fields keep the numbers


async def test_a_run_whose_workers_are_gone_and_cannot_be_replaced_stops_with_exit_3(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Mid-run, the only worker dies and its replacement never gets resources: the run stops (the records written
    so far stay); while another worker runs, waiting replacements do not stop it."""
    monkeypatch.setattr(pool_module, "WAIT_LOG_S", 0.05)
    backend = FakeBackend(dies=lambda worker, task, attempt: task == "t2")
    original = backend.start_worker

    def start_worker() -> int:
        handle = original()
        if handle >= 1:
            backend.unplaced.add(handle)
        return handle

    backend.start_worker = start_worker  # type: ignore[method-assign]
    with pytest.raises(WorkersLost, match=r"^no fake worker got the resources .* the records written so far are "
                       r"kept, and the same command resumes once they are free$"):
        await run_pool(backend, items(5), size=1, placement_timeout=0.3)
    assert [task for _, task, _ in backend.executed] == ["t0", "t1", "t2"]


def test_running_calls_are_the_oldest_up_to_the_concurrency() -> None:
    worker = PoolWorker(handle=0, index=0, state=WorkerState.READY)
    plan = items(7)
    worker.calls = [Call(worker, "watch"), Call(worker, "run", [(plan[0], 1, False), (plan[1], 1, False)]),
                    Call(worker, "run", [(plan[2], 1, False)]), Call(worker, "run", [(plan[3], 1, False)])]
    assert [len(call.items) for call in running_calls(worker, 1)] == [2]
    assert [len(call.items) for call in running_calls(worker, 3)] == [2, 1]
    assert [len(call.items) for call in running_calls(worker, 8)] == [2, 1, 1]


def test_the_book_puts_a_nodes_ready_workers_under_suspicion_until_they_answer() -> None:
    book = WorkerBook()
    a1, a2, b1, a3 = book.add("a1"), book.add("a2"), book.add("b1"), book.add("a3")
    for worker, node in ((a1, "a"), (a2, "a"), (b1, "b")):
        book.ready(worker, {"node_id": node})
    assert book.suspect("a") == [a1, a2]                      # a3 is still pending: it has not answered at all
    assert (a1.state, a3.state, b1.state) == (WorkerState.SUSPECT, WorkerState.PENDING, WorkerState.READY)
    assert DispatchWindow(iter(items(3))).batches_for(a1) == []
    assert book.answered(a1) and a1.state is WorkerState.READY and not book.answered(b1)
    assert book.on_node("a") == [a1, a2]


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
    assert window.batches_for(idle) == [[(plan[0], 2, True)]] and idle.isolated
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
