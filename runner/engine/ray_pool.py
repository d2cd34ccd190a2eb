"""The pool of Ray actors of one run, and the bounded window of in-flight items that feeds it.

- ``size`` actors (:class:`~runner.engine.ray_worker.EvalWorker`) are created with the :class:`WorkerSpec`'s
  resources. The run's :class:`RunContext` (benchmark, solution recipe, store) goes to the object store once;
  each actor builds the solution once; calls carry only task data.
- Items go only to workers that have answered their first call (Ray started them): a pool larger than the cluster
  fits now runs on the workers that started while the others wait for resources.
- Items are taken from the plan only when a worker has room: a worker holds at most ``2 * max(batch,
  max_concurrency)`` items (those running and as many queued behind them), so the driver's memory does not grow
  with the benchmark.
- Items travel in batches sized from each worker's measured throughput so one call carries about
  :data:`TARGET_CALL_S` seconds of its work (fast items share a call, slow ones go one per call).
- Workers write their records; the driver gets one ``(status, duplicate, seconds)`` tuple per item, and per call the
  seconds the batch kept its worker busy.
- A worker that dies (killed process, lost node, out of memory) is replaced; its in-flight items are retried with
  ``attempt + 1``, each alone on an idle worker (an item whose record the dead worker had written is not run
  again). After ``max_attempts`` the driver stores an error record of type ``WorkerDied`` through ``execute_one``.

Example, as :class:`~runner.engine.ray_executor.RayExecutor` uses it (after ``ray.init``)::

    pool = ActorPool(WorkerSpec(num_gpus=1), size=4)
    try:
        await pool.start(RunContext(benchmark, spec, store, run_id))    # actors up, the solution built once
        await pool.run(plan, progress)
    finally:
        pool.close()
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import ray
import structlog
from ray.exceptions import OutOfMemoryError, RayActorError, RayTaskError

from runner import log
from runner.core.config import WorkerSpec
from runner.core.errors import ConfigError, RunnerError
from runner.core.task import Task
from runner.engine import ray_cluster
from runner.engine.context import RunContext
from runner.engine.execute import execute_one, stored_status, worker_identity
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress
from runner.engine.ray_worker import Ack, EvalWorker
from runner.engine.solution import Solution

TARGET_CALL_S = 0.1
"""Seconds of a worker's work one actor call should carry: long next to Ray's per-call cost (about a millisecond),
short enough that progress and the end of the run stay smooth."""
MAX_BATCH = 256
"""The most items one call carries."""
_EWMA_WEIGHT = 0.3


class WorkerDied(Exception):
    """The error type of an item whose worker died ``max_attempts`` times while running it."""


@dataclass(eq=False)
class _Worker:
    handle: Any
    index: int
    in_flight: int = 0
    ready: bool = False
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


class ActorPool:
    """``size`` actors of ``spec`` and the window that feeds them (see the module's docstring).

    Args:
        spec: worker resources and behaviour.
        size: number of actors (a dead one is replaced, so the pool keeps this size).
        log_format: the actors' structlog format.

    After :meth:`run`, :attr:`workers` holds what each actor reported about itself and :attr:`deaths` the number
    of actors that died.
    """

    def __init__(self, spec: WorkerSpec, size: int, log_format: log.LogFormat = "json") -> None:
        self.spec = spec
        self.size = size
        self.log_format = log_format
        self.workers: list[dict[str, Any]] = []
        self.deaths = 0
        self._pool: list[_Worker] = []
        self._pending: dict[asyncio.Future[Any], _Call] = {}
        self._counter = itertools.count()
        self._actor_class: Any = None
        self._init_args: tuple[list[Any], dict[str, Any]] = ([], {})
        self._context: RunContext | None = None
        self._batch = 1
        self._rate: float | None = None
        self._log = structlog.get_logger("runner")

    async def start(self, context: RunContext) -> None:
        """Start the actors and wait until one of them has built the solution, so that a solution that cannot be
        built on a worker stops the run before it writes anything.

        Raises:
            ConfigError: the solution cannot be built on a worker.
        """
        self._context = context
        self._actor_class = ray.remote(EvalWorker).options(
            # Room for every call the window can have on one actor (2 * max(batch, concurrency) items, one or
            # more per call) and its describe call, so none waits in Ray's queue instead of the actor's semaphore.
            **ray_cluster.actor_options(self.spec, 2 * max(MAX_BATCH, self.spec.max_concurrency) + 1)
        )
        self._init_args = ([ray.put(context)], {"max_concurrency": self.spec.max_concurrency,
                                                "log_format": self.log_format})
        self._log.info("ray.pool", workers=self.size, per_worker=ray_cluster.demand(self.spec),
                       max_concurrency=self.spec.max_concurrency, cluster=ray.get_runtime_context().gcs_address)
        for _ in range(self.size):
            self._start_worker()
        idle = _Dispatch(iter(()))
        while not self.workers:
            if self.deaths >= self.size * self.spec.max_attempts:
                raise ConfigError(f"{self.deaths} Ray workers died while starting, before any could run an item; "
                                  "check the workers' logs (out of memory? a crash on import?)")
            # Only describe calls are pending: a worker that dies starting is replaced, one that cannot build the
            # solution raises.
            done, _ = await asyncio.wait(self._pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                await self._collect(future, idle, None)

    async def run(self, plan: Iterator[WorkItem], progress: Progress) -> None:
        """Run every item of ``plan`` on the started pool and feed ``progress`` one acknowledgement per item.

        Raises:
            ConfigError: the solution cannot be built on a worker.
            StorageError: a worker cannot write a record (the run stops; finished records stay).
        """
        dispatch = _Dispatch(plan)
        while True:
            for worker in self._pool:
                self._fill(worker, dispatch)
            # Run calls pending, or work left while workers Ray has not started yet may still come up (a pool
            # larger than the cluster fits now waits on them instead of ending or spinning).
            running = any(call.kind == "run" for call in self._pending.values())
            if not running and ((dispatch.exhausted and not dispatch.retries) or not self._pending):
                break
            done, _ = await asyncio.wait(self._pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                await self._collect(future, dispatch, progress)

    def close(self) -> None:
        """Stop waiting for answers and kill every actor of the pool."""
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        for worker in self._pool:
            if worker.alive:
                _kill(worker)
        self._pool = []

    def _start_worker(self) -> None:
        args, kwargs = self._init_args
        worker = _Worker(self._actor_class.remote(*args, **kwargs), next(self._counter))
        self._pool.append(worker)
        self._pending[asyncio.wrap_future(worker.handle.describe.remote().future())] = _Call(worker, [], "describe")

    def _fill(self, worker: _Worker, dispatch: _Dispatch) -> None:
        """Give ``worker`` work: a retry, alone, once it is idle; else whole batches from the plan up to its room.

        A retried item runs alone on its worker, so a second death is its own doing and innocent items that were
        queued behind a crashing one lose at most one attempt. While retries wait, workers get nothing new and drain.
        """
        if not worker.alive or worker.isolated or not worker.ready:
            return
        if dispatch.retries:
            if worker.in_flight == 0:
                self._submit(worker, [dispatch.retries.popleft()])
                worker.isolated = True
            return
        room = 2 * max(self._batch, self.spec.max_concurrency) - worker.in_flight
        # Whole batches only (an idle worker takes what there is): many small calls cost more than few full ones.
        while room >= self._batch or (room > 0 and worker.in_flight == 0):
            batch = dispatch.take(min(self._batch, room))
            if not batch:
                return
            self._submit(worker, batch)
            room -= len(batch)

    def _submit(self, worker: _Worker, batch: list[tuple[WorkItem, int]]) -> None:
        data = [(item.task, item.repeat, attempt, item.index) for item, attempt in batch]
        self._pending[asyncio.wrap_future(worker.handle.run.remote(data).future())] = _Call(worker, batch)
        worker.in_flight += len(batch)

    async def _collect(self, future: asyncio.Future[Any], dispatch: _Dispatch, progress: Progress | None) -> None:
        """Account for one finished call: acknowledgements, a worker's description, or a dead worker (``progress``
        may be ``None`` while only describe calls are pending)."""
        assert self._context is not None
        call = self._pending.pop(future)
        call.worker.in_flight -= len(call.items)
        if call.kind == "run":
            call.worker.isolated = False
        try:
            answer = future.result()
        except (RayActorError, OutOfMemoryError) as exc:
            if isinstance(exc, RayActorError) and exc.actor_init_failed:
                raise ConfigError(
                    f"the solution {self._context.solution.display!r} could not be built on a Ray worker "
                    f"({_cause_line(exc)}); check that its module is importable on the workers, or run with "
                    "--sequential to build it in this process (a debugger can step through it there)"
                ) from None
            if call.worker.alive:
                self._bury(call.worker, exc)
                self._start_worker()
            for item, attempt in call.items:
                if attempt >= self.spec.max_attempts:
                    assert progress is not None
                    progress.advance(await _give_up(item, attempt, exc, self._context))
                else:
                    dispatch.retries.append((item, attempt + 1))
            return
        except RayTaskError as exc:
            if isinstance(exc.cause, RunnerError):
                raise exc.cause from None
            raise
        if call.kind == "describe":
            call.worker.ready = True
            self.workers.append(answer)
            self._log.info("ray.worker", worker=call.worker.index, **answer)
        else:
            assert progress is not None
            self._account(answer, progress)

    def _account(self, answer: tuple[list[Ack], float], progress: Progress) -> None:
        """Count a call's acknowledgements, and size batches from the throughput it shows: a batch of ``n`` items
        that kept a worker busy ``busy`` seconds at concurrency ``c`` means about ``max(n, c) / busy`` items/s per
        worker (``n`` items finish in ``ceil(n / c)`` rounds), so a call carries :data:`TARGET_CALL_S` of that."""
        acks, busy = answer
        for status, duplicate, _seconds in acks:
            progress.advance(status, duplicate=duplicate)
        if busy <= 0:
            return
        rate = max(len(acks), self.spec.max_concurrency) / busy
        self._rate = rate if self._rate is None else (1 - _EWMA_WEIGHT) * self._rate + _EWMA_WEIGHT * rate
        self._batch = max(1, min(MAX_BATCH, int(TARGET_CALL_S * self._rate)))

    def _bury(self, worker: _Worker, exc: BaseException) -> None:
        """Mark ``worker`` dead, drop it from the pool, and make sure Ray does not keep it."""
        worker.alive = False
        self._pool.remove(worker)
        self.deaths += 1
        self._log.warning("ray.worker_died", worker=worker.index, reason=_cause_line(exc),
                          in_flight=worker.in_flight, detail="its items are retried on a new worker")
        _kill(worker)


async def _give_up(item: WorkItem, attempt: int, exc: BaseException, context: RunContext) -> str:
    """Store the error record of an item whose workers kept dying (unless one of them stored it); its status."""
    existing = await asyncio.to_thread(stored_status, context.store, item.task.id, item.repeat)
    if existing is not None:
        return existing
    message = f"its worker died during each of {attempt} attempts (last: {_cause_line(exc)})"

    def died(_task: Task) -> None:
        raise WorkerDied(message)

    result = await execute_one(item.task, item.repeat, Solution(died), context.store, run_id=context.run_id,
                               task_index=item.index, attempt=attempt,
                               worker=worker_identity(role="driver"), sync_in_thread=False)
    return result.status


def _kill(worker: _Worker) -> None:
    try:
        ray.kill(worker.handle, no_restart=True)
    except (RayActorError, ValueError):
        pass


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _cause_line(exc: BaseException) -> str:
    """The last ``SomeError: message`` line of a Ray error (the original exception), else its first line."""
    lines = [line.strip() for line in str(exc).splitlines()]
    causes = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Exit): ", line)]
    return causes[-1] if causes else _first_line(exc)
