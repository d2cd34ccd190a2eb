"""The Ray executor: a pool of actors, fed from the streamed plan through a bounded window of in-flight items.

How it works:

- ``len(pool)`` actors (:class:`~runner.engine.ray_worker.EvalWorker`) are created with the :class:`WorkerSpec`'s
  resources (CPUs, GPUs, memory, custom resources, accelerator type). The benchmark, the solution recipe and the store
  go to the object store once; each actor builds the solution once.
- Items are taken from the plan only when a worker has room: a worker holds at most ``2 * max(batch,
  max_concurrency)`` items (those running and as many queued behind them), so the driver's memory does not grow with
  the benchmark.
- Items travel in batches sized from the measured throughput so one call carries about :data:`TARGET_CALL_S` seconds
  of a worker's work (fast items share a call, slow ones go one per call); each actor runs a batch's items
  concurrently, up to ``max_concurrency`` solution calls at a time.
- Workers write their records; the driver gets one ``(status, written, seconds)`` tuple per item and feeds progress.
- A worker that dies (killed process, lost node, out of memory) is replaced; its in-flight items go back to the
  window, one per call, with ``attempt + 1`` (an item whose record the dead worker had written is not run again).
  After ``max_attempts`` the driver stores an error record of type ``WorkerDied`` through the same ``execute_one``.

Example::

    executor = RayExecutor(WorkerSpec(num_workers=4, num_gpus=1, max_concurrency=8))
    executor.preflight()                     # is RAY_ADDRESS reachable? (Ray starts when there is work)
    outcome = await execute_run(request, executor)
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import ray
import structlog
from ray.exceptions import OutOfMemoryError, RayActorError, RayTaskError

from runner import log
from runner.core.benchmark import BenchmarkBase
from runner.core.config import WorkerSpec
from runner.core.errors import ConfigError, RunnerError
from runner.core.task import Task
from runner.engine import ray_cluster
from runner.engine.execute import execute_one, stored_status, worker_identity
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress
from runner.engine.ray_worker import Ack, EvalWorker
from runner.engine.solution import Solution, SolutionSpec
from runner.storage.store import ResultStore

TARGET_CALL_S = 0.1
"""Seconds of work one actor call should carry: long enough that Ray's per-call cost (about a millisecond) is
small next to it, short enough that progress and the end of the run stay smooth."""
MAX_BATCH = 256
"""The most items one call carries."""
_EWMA_WEIGHT = 0.5
_RATE_WINDOW_S = 0.25


class WorkerDied(Exception):
    """The error type of an item whose worker died ``max_attempts`` times while running it."""


@dataclass(eq=False)
class _Worker:
    handle: Any
    index: int
    in_flight: int = 0
    alive: bool = True
    isolated: bool = False


@dataclass(eq=False)
class _Call:
    worker: _Worker
    items: list[tuple[WorkItem, int]]
    kind: str = "run"


@dataclass
class _Dispatch:
    """Where the next items come from: the plan, and items whose worker died (retried alone, see ``_fill``)."""

    plan: Iterator[WorkItem]
    retries: deque[tuple[WorkItem, int]] = field(default_factory=deque)
    exhausted: bool = False

    def take(self, count: int) -> list[tuple[WorkItem, int]]:
        """Up to ``count`` new items from the plan, each at attempt 1."""
        if self.exhausted:
            return []
        batch = [(item, 1) for item in itertools.islice(self.plan, count)]
        if len(batch) < count:
            self.exhausted = True
        return batch


class RayExecutor:
    """Run items on a pool of Ray actors built from a :class:`WorkerSpec`.

    Args:
        spec: worker resources and behaviour (``num_workers`` ``None``: as many as the cluster's nodes fit).
        address: the cluster (``host:port`` of the GCS, ``ray://...``, ``auto``); ``None``: ``RAY_ADDRESS`` if
            set, else an embedded Ray on this machine.
        log_format: the workers' structlog format (default: JSON lines, which Ray forwards to the driver).

    After a run, :attr:`workers` holds what each actor reported about itself (host, pid, node and actor ids, and
    the resources Ray assigned to it), and :attr:`deaths` the number of workers that died.
    """

    name = "ray"

    def __init__(self, spec: WorkerSpec | None = None, address: str | None = None,
                 log_format: log.LogFormat = "json") -> None:
        self.spec = spec or WorkerSpec()
        self.address = address
        self.log_format = log_format
        self.workers: list[dict[str, Any]] = []
        self.deaths = 0
        self._started_ray = False
        self._connected = False
        self._pool: list[_Worker] = []
        self._batch = 1
        self._rate: float | None = None
        self._acked = 0
        self._rate_mark = time.monotonic()

    def preflight(self) -> None:
        """Check the cluster before the run writes anything: attach now to a given cluster (``address`` or
        ``RAY_ADDRESS``), which takes a second; an embedded Ray starts only when there is work, so resuming a
        finished run costs no Ray start-up.

        Raises:
            RayUnavailable: Ray missing, the address unreachable, or the cluster refusing this driver.
        """
        ray_cluster.preflight(self.address)
        if ray_cluster.cluster_address(self.address):
            self._connect()

    def _connect(self) -> None:
        if not self._connected:
            self._started_ray = ray_cluster.connect(self.address)
            self._connected = True

    async def execute(
        self,
        items: Iterable[WorkItem],
        *,
        benchmark: BenchmarkBase,
        solution: SolutionSpec,
        store: ResultStore,
        run_id: str,
        timeout: float | None,
        retry_errors: int,
        progress: Progress,
    ) -> None:
        """Execute ``items`` on the pool, feeding ``progress`` one acknowledgement per item.

        Raises:
            ConfigError: no node fits one worker, or the solution cannot be built on a worker.
            StorageError: a worker cannot write a record (the run stops; finished records stay).
        """
        plan = iter(items)
        first = next(plan, None)
        if first is None:
            return
        self._connect()
        try:
            await self._execute(
                itertools.chain([first], plan), benchmark, solution, store, run_id, timeout, retry_errors, progress
            )
        finally:
            self._finish()

    async def _execute(
        self,
        plan: Iterator[WorkItem],
        benchmark: BenchmarkBase,
        solution: SolutionSpec,
        store: ResultStore,
        run_id: str,
        timeout: float | None,
        retry_errors: int,
        progress: Progress,
    ) -> None:
        logger = structlog.get_logger("runner")
        size = ray_cluster.pool_size(self.spec, progress.total)
        shared = [ray.put(benchmark), ray.put(solution), ray.put(store)]
        actor_class = ray.remote(EvalWorker).options(
            **ray_cluster.actor_options(self.spec, self.spec.max_concurrency + MAX_BATCH + 2)
        )
        settings = {
            "run_id": run_id,
            "timeout": timeout,
            "retry_errors": retry_errors,
            "max_concurrency": self.spec.max_concurrency,
            "log_format": self.log_format,
        }
        logger.info("ray.pool", workers=size, per_worker=ray_cluster.demand(self.spec),
                    max_concurrency=self.spec.max_concurrency, cluster=ray.get_runtime_context().gcs_address)
        pending: dict[asyncio.Future[Any], _Call] = {}
        counter = itertools.count()

        def start_worker() -> _Worker:
            worker = _Worker(actor_class.remote(*shared, **settings), next(counter))
            self._pool.append(worker)
            pending[asyncio.wrap_future(worker.handle.describe.remote().future())] = _Call(worker, [], "describe")
            return worker

        for _ in range(size):
            start_worker()
        dispatch = _Dispatch(plan)
        try:
            await self._drive(dispatch, pending, start_worker, solution, store, run_id, progress, logger)
        finally:
            for future in pending:
                future.cancel()

    async def _drive(self, dispatch: _Dispatch, pending: dict[asyncio.Future[Any], _Call], start_worker: Any,
                     solution: SolutionSpec, store: ResultStore, run_id: str, progress: Progress,
                     logger: Any) -> None:
        """Keep the workers fed until the plan is exhausted and every item is acknowledged."""
        while True:
            for worker in self._pool:
                self._fill(worker, dispatch, pending)
            if not any(call.kind == "run" for call in pending.values()):
                break
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                call = pending.pop(future)
                call.worker.in_flight -= len(call.items)
                if call.kind == "run":
                    call.worker.isolated = False
                try:
                    answer = future.result()
                except (RayActorError, OutOfMemoryError) as exc:
                    if isinstance(exc, RayActorError) and exc.actor_init_failed:
                        raise ConfigError(
                            f"the solution {solution.display!r} could not be built on a Ray worker: "
                            f"{_first_line(exc)}; run with --sequential to debug it"
                        ) from None
                    if call.worker.alive:
                        self._bury(call.worker, exc, logger)
                        start_worker()
                    for item, attempt in call.items:
                        if attempt >= self.spec.max_attempts:
                            progress.advance(await self._give_up(item, attempt, exc, store, run_id))
                        else:
                            dispatch.retries.append((item, attempt + 1))
                    continue
                except RayTaskError as exc:
                    if isinstance(exc.cause, RunnerError):
                        raise exc.cause from None
                    raise
                if call.kind == "describe":
                    self.workers.append(answer)
                    logger.info("ray.worker", worker=call.worker.index, **answer)
                    continue
                self._account(answer, progress)

    def _fill(self, worker: _Worker, dispatch: _Dispatch, pending: dict[asyncio.Future[Any], _Call]) -> None:
        """Give ``worker`` work: a retry, alone, once it is idle; else whole batches from the plan up to its room.

        A retried item runs alone on its worker, so a second death is its own doing and innocent items that were
        queued behind a crashing one lose at most one attempt. While retries wait, workers get nothing new and drain.
        """
        if not worker.alive or worker.isolated:
            return
        if dispatch.retries:
            if worker.in_flight == 0:
                self._submit(worker, [dispatch.retries.popleft()], pending)
                worker.isolated = True
            return
        room = 2 * max(self._batch, self.spec.max_concurrency) - worker.in_flight
        # Whole batches only (an idle worker takes what there is): many small calls cost more than few full ones.
        while room >= self._batch or (room > 0 and worker.in_flight == 0):
            batch = dispatch.take(min(self._batch, room))
            if not batch:
                return
            self._submit(worker, batch, pending)
            room -= len(batch)

    @staticmethod
    def _submit(worker: _Worker, batch: list[tuple[WorkItem, int]], pending: dict[asyncio.Future[Any], _Call]) -> None:
        data = [(item.task, item.repeat, attempt) for item, attempt in batch]
        pending[asyncio.wrap_future(worker.handle.run.remote(data).future())] = _Call(worker, batch)
        worker.in_flight += len(batch)

    def _account(self, acks: list[Ack], progress: Progress) -> None:
        """Count ``acks``, and size batches to the measured rate: a call carries about :data:`TARGET_CALL_S`
        seconds of one worker's throughput."""
        for status, _written, _seconds in acks:
            progress.advance(status)
        now = time.monotonic()
        self._acked += len(acks)
        elapsed = now - self._rate_mark
        if elapsed >= _RATE_WINDOW_S:
            rate = self._acked / elapsed
            self._rate = rate if self._rate is None else (1 - _EWMA_WEIGHT) * self._rate + _EWMA_WEIGHT * rate
            self._acked, self._rate_mark = 0, now
            per_worker = self._rate / max(1, sum(1 for w in self._pool if w.alive))
            self._batch = max(1, min(MAX_BATCH, int(TARGET_CALL_S * per_worker)))

    def _bury(self, worker: _Worker, exc: BaseException, logger: Any) -> None:
        """Mark ``worker`` dead and make sure Ray does not keep it."""
        worker.alive = False
        self.deaths += 1
        logger.warning("ray.worker_died", worker=worker.index, reason=_first_line(exc),
                       in_flight=worker.in_flight, detail="its items are retried on a new worker")
        try:
            ray.kill(worker.handle, no_restart=True)
        except (RayActorError, ValueError):
            pass

    async def _give_up(self, item: WorkItem, attempt: int, exc: BaseException, store: ResultStore,
                       run_id: str) -> str:
        """Store the error record of an item whose workers kept dying (unless one of them stored it); its status."""
        existing = await asyncio.to_thread(stored_status, store, item.task.id, item.repeat)
        if existing is not None:
            return existing
        message = f"its worker died during each of {attempt} attempts (last: {_first_line(exc)})"

        def died(_task: Task) -> None:
            raise WorkerDied(message)

        result = await execute_one(item.task, item.repeat, Solution(died), store, run_id=run_id, attempt=attempt,
                                   worker=worker_identity(role="driver"), sync_in_thread=False)
        return result.status

    def _finish(self) -> None:
        """Release the actors, and the embedded Ray if this executor started it."""
        for worker in self._pool:
            if worker.alive:
                try:
                    ray.kill(worker.handle, no_restart=True)
                except (RayActorError, ValueError):
                    pass
        self._pool = []
        if self._started_ray:
            ray_cluster.shutdown()
            self._started_ray = False
            self._connected = False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
