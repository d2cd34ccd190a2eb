"""A pool of workers and the bounded window of in-flight items that feeds it, apart from any cluster.

Three parts, each testable alone (``tests/engine/test_pool.py`` drives them with fake workers, no Ray), after Ray
Data's actor-pool operator:

- :class:`WorkerBook`: worker bookkeeping. A worker is ``pending`` until it answers its first call (its cluster
  started it and it built the solution), then ``ready``; a worker that dies is ``dead`` and replaced, so the pool
  keeps its size.
- :class:`DispatchWindow`: which items go to a worker next. New items come from the plan only when a worker has
  room (at most ``2 * max(batch, max_concurrency)`` items each: those running and as many queued), so the driver's
  memory does not grow with the benchmark; items whose worker died wait in a retry queue and run alone. Batches are
  sized by :func:`batch_size` from each worker's measured throughput (:class:`Throughput`).
- :class:`WorkerPool`: the loop that starts workers through a :class:`WorkerBackend`, fills them from the window,
  and accounts for each answer: acknowledgements, a description, or a death.

A :class:`WorkerBackend` is the cluster: :class:`~runner.engine.ray_pool.RayBackend` starts Ray actors. Example::

    pool = WorkerPool(RayBackend(spec, context), spec, size=4, give_up=record_worker_death)
    try:
        await pool.start("my-solution")            # workers up, one has built the solution
        await pool.run(iter(plan), progress)
    finally:
        pool.close()
"""

from __future__ import annotations

import asyncio
import enum
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from runner.core.config import WorkerSpec
from runner.core.errors import ConfigError
from runner.core.record import ErrorInfo
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress

TARGET_CALL_S = 0.1
"""Seconds of a worker's work one call should carry: long next to a cluster's per-call cost (about a millisecond on
Ray), short enough that progress and the end of the run stay smooth."""
MAX_BATCH = 256
"""The most items one call carries."""
EWMA_WEIGHT = 0.3
"""The weight of the newest measurement in the throughput's moving average."""

Ack = tuple[str, bool, float, ErrorInfo | None]
"""One item's acknowledgement: (record status, whether it was a duplicate (:attr:`ItemResult.duplicate
<runner.engine.execute.ItemResult.duplicate>`), seconds of the item, what ended it as an error
(:attr:`ItemResult.error <runner.engine.execute.ItemResult.error>`))."""
Batch = list[tuple[WorkItem, int]]
"""Items of one call, each with its attempt (1 for a first execution)."""


class WorkerLost(Exception):
    """A worker died while it held a call (its process or node ended, it ran out of memory); the message says why
    in one line. Raised by a :class:`WorkerBackend`'s awaitables."""


class WorkerBuildFailed(Exception):
    """A worker could not build the solution (its constructor raised); the message is the cause in one line."""


class WorkerBackend(Protocol):
    """The cluster under a :class:`WorkerPool`: starts workers and calls them.

    The awaitables raise :class:`WorkerLost` when the worker died, :class:`WorkerBuildFailed` when it could not
    build the solution, and a :class:`~runner.core.errors.RunnerError` that the worker raised (a store that cannot
    be written) as it is.
    """

    worker_label: str
    """What its workers are called in messages, e.g. ``"Ray worker"``."""

    def start_worker(self) -> Any:
        """Start one worker; its handle."""
        ...

    def describe(self, handle: Any) -> Awaitable[dict[str, Any]]:
        """The worker's first call: what it reports about itself once it is up and has built the solution."""
        ...

    def run(self, handle: Any, batch: Batch) -> Awaitable[tuple[list[Ack], float]]:
        """Execute ``batch``: one acknowledgement per item and the seconds the batch kept the worker busy."""
        ...

    def kill(self, handle: Any) -> None:
        """Stop the worker for good (no error if it is gone already)."""
        ...


def batch_size(rate: float | None, target_s: float = TARGET_CALL_S, max_batch: int = MAX_BATCH) -> int:
    """Items one call should carry for a worker doing ``rate`` items/s (``None``: not measured yet): about
    ``target_s`` seconds of its work, between 1 and ``max_batch``."""
    if rate is None:
        return 1
    return max(1, min(max_batch, int(target_s * rate)))


@dataclass
class Throughput:
    """Items/s of one worker, as an exponentially weighted moving average of the calls it answered.

    A call of ``n`` items that kept a worker busy ``busy`` seconds at concurrency ``c`` means about
    ``max(n, c) / busy`` items/s (``n`` items finish in ``ceil(n / c)`` rounds).
    """

    concurrency: int = 1
    weight: float = EWMA_WEIGHT
    rate: float | None = None

    def observe(self, items: int, busy: float) -> None:
        """Account for a call of ``items`` items that kept its worker busy ``busy`` seconds (ignored if 0)."""
        if busy <= 0:
            return
        rate = max(items, self.concurrency) / busy
        self.rate = rate if self.rate is None else (1 - self.weight) * self.rate + self.weight * rate

    @property
    def batch(self) -> int:
        """The batch size for the measured rate (:func:`batch_size`)."""
        return batch_size(self.rate)


class WorkerState(str, enum.Enum):
    """Where a worker is in its life: ``pending`` (started, not answered yet), ``ready``, ``dead``."""

    PENDING = "pending"
    READY = "ready"
    DEAD = "dead"


@dataclass(eq=False)
class PoolWorker:
    """One worker of the pool: its backend handle, a number for logs, its state, the items it holds, and whether
    it runs a retried item alone (``isolated``)."""

    handle: Any
    index: int
    state: WorkerState = WorkerState.PENDING
    in_flight: int = 0
    isolated: bool = False


class WorkerBook:
    """The pool's workers and what each reported: pending -> ready -> dead (a dead one is replaced by the pool).

    After a run, :attr:`descriptions` holds what every worker that became ready reported about itself and
    :attr:`deaths` the number of workers that died.
    """

    def __init__(self) -> None:
        self.workers: list[PoolWorker] = []
        self.descriptions: list[dict[str, Any]] = []
        self.deaths = 0
        self._numbers = itertools.count()

    def add(self, handle: Any) -> PoolWorker:
        """A new pending worker."""
        worker = PoolWorker(handle, next(self._numbers))
        self.workers.append(worker)
        return worker

    def ready(self, worker: PoolWorker, description: dict[str, Any]) -> None:
        """``worker`` answered its first call with ``description``."""
        worker.state = WorkerState.READY
        self.descriptions.append(description)

    def dead(self, worker: PoolWorker) -> bool:
        """Mark ``worker`` dead and drop it; ``False`` if it was dead already (one death, several calls)."""
        if worker.state is WorkerState.DEAD:
            return False
        worker.state = WorkerState.DEAD
        self.workers.remove(worker)
        self.deaths += 1
        return True

    @property
    def any_ready(self) -> bool:
        """Whether some worker has answered."""
        return any(worker.state is WorkerState.READY for worker in self.workers)


class DispatchWindow:
    """Which items go to a worker next: new ones from the plan, or items whose worker died (retried alone).

    Args:
        plan: the items to run, in order (consumed lazily).
        concurrency: items a worker runs at the same time (``WorkerSpec.max_concurrency``).
    """

    def __init__(self, plan: Iterator[WorkItem], concurrency: int = 1) -> None:
        self.plan = plan
        self.concurrency = concurrency
        self.retries: deque[tuple[WorkItem, int]] = deque()
        self.exhausted = False
        self.throughput = Throughput(concurrency)

    @property
    def finished(self) -> bool:
        """Whether nothing is left to hand out (the plan is used up and no retry waits)."""
        return self.exhausted and not self.retries

    def room(self, worker: PoolWorker) -> int:
        """Items ``worker`` may still take: up to ``2 * max(batch, concurrency)`` in flight."""
        return 2 * max(self.throughput.batch, self.concurrency) - worker.in_flight

    def retry(self, item: WorkItem, attempt: int) -> None:
        """Queue ``item`` to run again as attempt ``attempt``."""
        self.retries.append((item, attempt))

    def batches_for(self, worker: PoolWorker) -> list[Batch]:
        """The calls to give ``worker`` now.

        A retry goes alone to an idle worker (which is then ``isolated`` until the call ends), so a second death is
        the item's own doing and innocent items queued behind a crashing one lose at most one attempt; while
        retries wait, workers get nothing new and drain. Otherwise whole batches from the plan up to the worker's
        room (an idle worker takes what there is): many small calls cost more than few full ones.
        """
        if worker.state is not WorkerState.READY or worker.isolated:
            return []
        if self.retries:
            if worker.in_flight:
                return []
            worker.isolated = True
            return [[self.retries.popleft()]]
        batch, room, calls = self.throughput.batch, self.room(worker), []
        while room >= batch or (room > 0 and worker.in_flight == 0 and not calls):
            taken = self._take(min(batch, room))
            if not taken:
                break
            calls.append(taken)
            room -= len(taken)
        return calls

    def _take(self, count: int) -> Batch:
        """Up to ``count`` new items from the plan, each at attempt 1."""
        if self.exhausted:
            return []
        taken = [(item, 1) for item in itertools.islice(self.plan, count)]
        if len(taken) < count:
            self.exhausted = True
        return taken


@dataclass(eq=False)
class _Call:
    worker: PoolWorker
    items: Batch = field(default_factory=list)
    describe: bool = False


GiveUp = Callable[[WorkItem, int, BaseException], Awaitable[str]]
"""Records an item whose workers kept dying (``item``, the last attempt, the last death); returns the status of the
item's record (one a dying worker may have written first is kept)."""


class WorkerPool:
    """``size`` workers of ``spec`` and the window that feeds them (see the module's docstring).

    Args:
        backend: the cluster that starts and calls workers.
        spec: worker behaviour: ``max_concurrency`` and ``max_attempts``.
        size: number of workers (a dead one is replaced, so the pool keeps this size).
        give_up: records an item after ``spec.max_attempts`` deaths (see :data:`GiveUp`).

    After :meth:`run`, :attr:`book` holds the workers' descriptions and deaths.
    """

    def __init__(self, backend: WorkerBackend, spec: WorkerSpec, size: int, give_up: GiveUp) -> None:
        self.backend = backend
        self.spec = spec
        self.size = size
        self.give_up = give_up
        self.book = WorkerBook()
        self._pending: dict[asyncio.Future[Any], _Call] = {}
        self._log = structlog.get_logger("runner")

    async def start(self, solution: str) -> None:
        """Start the workers and wait until one of them has built the solution (named ``solution`` in messages),
        so that a solution that cannot be built on a worker stops the run before it writes anything.

        Raises:
            ConfigError: the solution cannot be built on a worker, or workers kept dying while starting.
        """
        self._solution = solution
        for _ in range(self.size):
            self._start_worker()
        idle = DispatchWindow(iter(()))
        while not self.book.any_ready:
            if self.book.deaths >= self.size * self.spec.max_attempts:
                raise ConfigError(f"{self.book.deaths} {self.backend.worker_label}s died while starting, before any "
                                  "could run an item; check the workers' logs (out of memory? a crash on import?)")
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
            RunStopped: the model server speaks another protocol (``progress`` raises it).
        """
        window = DispatchWindow(plan, self.spec.max_concurrency)
        while True:
            for worker in list(self.book.workers):
                for batch in window.batches_for(worker):
                    self._submit(worker, batch)
            # Run calls pending, or work left while workers not started yet may still come up (a pool larger than
            # the cluster fits now waits on them instead of ending or spinning).
            running = any(not call.describe for call in self._pending.values())
            if not running and (window.finished or not self._pending):
                break
            done, _ = await asyncio.wait(self._pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                await self._collect(future, window, progress)

    def close(self) -> None:
        """Stop waiting for answers and stop every worker of the pool."""
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        for worker in self.book.workers:
            self.backend.kill(worker.handle)
        self.book.workers.clear()

    def _start_worker(self) -> None:
        worker = self.book.add(self.backend.start_worker())
        self._pending[asyncio.ensure_future(self.backend.describe(worker.handle))] = _Call(worker, describe=True)

    def _submit(self, worker: PoolWorker, batch: Batch) -> None:
        self._pending[asyncio.ensure_future(self.backend.run(worker.handle, batch))] = _Call(worker, batch)
        worker.in_flight += len(batch)

    async def _collect(self, future: asyncio.Future[Any], window: DispatchWindow, progress: Progress | None) -> None:
        """Account for one finished call: acknowledgements, a worker's description, or a dead worker (``progress``
        may be ``None`` while only describe calls are pending)."""
        call = self._pending.pop(future)
        call.worker.in_flight -= len(call.items)
        if not call.describe:
            call.worker.isolated = False
        try:
            answer = future.result()
        except WorkerBuildFailed as exc:
            raise ConfigError(
                f"the solution {self._solution!r} could not be built on a {self.backend.worker_label} ({exc}); "
                "check that its module is importable on the workers, or run with --sequential to build it in this "
                "process (a debugger can step through it there)"
            ) from None
        except WorkerLost as exc:
            if self.book.dead(call.worker):
                self._log.warning("worker.died", worker=call.worker.index, reason=str(exc),
                                  in_flight=call.worker.in_flight + len(call.items),
                                  detail="its items are retried on a new worker")
                self.backend.kill(call.worker.handle)
                self._start_worker()
            for item, attempt in call.items:
                if attempt >= self.spec.max_attempts:
                    assert progress is not None
                    progress.advance(await self.give_up(item, attempt, exc))
                else:
                    window.retry(item, attempt + 1)
            return
        if call.describe:
            self.book.ready(call.worker, answer)
            self._log.info("worker.ready", worker=call.worker.index, **answer)
            return
        assert progress is not None
        acks, busy = answer
        for status, duplicate, _seconds, error in acks:
            progress.advance(status, duplicate=duplicate, error=error)
        window.throughput.observe(len(acks), busy)
