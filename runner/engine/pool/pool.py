"""A pool of workers fed from a bounded window of in-flight items, apart from any cluster.

Three parts, each testable alone (``tests/engine/test_pool.py`` drives them with fake workers, no Ray):

- :class:`~runner.engine.pool.workers.WorkerBook`: which workers are pending, ready, suspect or dead, on which node, and
  their calls in flight (:mod:`runner.engine.pool.workers`).
- :class:`~runner.engine.pool.dispatch.DispatchWindow`: which items go to a worker next and in calls of what size
  (:mod:`runner.engine.pool.dispatch`).
- :class:`WorkerPool`: the loop that starts workers through a :class:`WorkerBackend`, fills them from the window,
  and accounts for each answer: acknowledgements, a description, an alarm (a worker's event loop blocked, its
  memory over the limit), or a death.

What a fault costs:

- A worker dies: the items of its running calls (:func:`~runner.engine.pool.workers.running_calls`) are charged an
  attempt and retried alone; the items queued behind them are requeued at the same attempt, once: an item that is
  queued on a dying worker a second time is charged too. (A call counts as running by its place in the worker's
  queue; an older item still writing its record can hold that place while the item that killed the worker had
  already started, so an item that keeps being present at deaths is charged rather than requeued for ever.) After
  ``max_attempts`` charged deaths an item is recorded as a ``WorkerDied`` error. The worker is replaced, and its
  node's other workers become suspects: if the cluster says the node is dead (:meth:`WorkerBackend.node_alive`)
  they are treated as dead at once, otherwise each is probed and gets work again once it answers.
- A worker raises an alarm (:mod:`runner.engine.item.watchdog`): the blamed item is recorded (``timeout`` for a blocked
  event loop, ``error`` for memory), the worker is killed and replaced, and its other items are requeued without
  an attempt charged. An alarm that blames no single item counts as a death.

A :class:`WorkerBackend` is the cluster: :class:`~runner.engine.ray.backend.RayBackend` starts Ray actors. Example::

    pool = WorkerPool(RayBackend(spec, context), spec, size=4, record=record_fault)
    try:
        await pool.start("my-solution")            # workers up, one has built the solution
        await pool.run(iter(plan), progress)
    finally:
        pool.close()
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

import structlog

from runner.core.config import WorkerSpec, resources_text
from runner.core.errors import ConfigError, ResourcesBusy, WorkersLost
from runner.engine.pool.dispatch import DispatchWindow
from runner.engine.item.execute import Fault, ItemResult
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress
from runner.engine.pool.workers import Batch, Call, PoolWorker, WorkerBook, WorkerState, running_calls

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
        """What the worker reports about itself once it is up and has built the solution (its first call, and the
        probe of a suspect): answered even while its items run."""
        ...

    def run(self, handle: Any, batch: Batch) -> Awaitable[tuple[list[ItemResult], float]]:
        """Execute ``batch``: one acknowledgement per item and the seconds the batch kept the worker busy."""
        ...

    def watch(self, handle: Any) -> Awaitable[dict[str, Any]]:
        """Answers only when the worker must be replaced: an :class:`~runner.engine.item.watchdog.Alarm` as a dict."""
        ...

    def node_alive(self, node: str) -> bool | None:
        """Whether the cluster counts ``node`` alive (``None``: unknown). Blocking; called in a thread."""
        ...

    def waiting(self, handles: list[Any]) -> dict[str, Any]:
        """What the started workers ``handles`` that have not answered yet wait for: ``unplaced`` (how many still
        wait for their resources; ``None``: unknown), ``wants`` (what one worker asks for) and ``free`` (what the
        cluster has free now). Blocking; called in a thread."""
        ...

    def release(self, handles: list[Any]) -> None:
        """Let the workers end what they hold (their model replicas) before they are killed; blocking, bounded."""
        ...

    def kill(self, handle: Any) -> None:
        """Stop the worker for good (no error if it is gone already)."""
        ...


WAIT_LOG_S = 30.0
"""Seconds between two ``pool.waiting`` lines while workers wait to start (ARCHITECTURE: the driver is never silent
for longer)."""

Recorder = Callable[[WorkItem, int, Fault], Awaitable[str]]
"""Stores the record of an item (``item``, its attempt, the :class:`Fault`) unless it has one; returns the status of
the item's stored record."""

_IDENTITY = ("host", "pid", "node_id", "actor_id")
"""The keys of a worker's description that name it in a record."""


class WorkerPool:
    """``size`` workers of ``spec`` and the window that feeds them (see the module's docstring).

    Args:
        backend: the cluster that starts and calls workers.
        spec: worker behaviour: ``max_concurrency`` and ``max_attempts``.
        size: number of workers (a dead one is replaced, so the pool keeps this size).
        record: stores the record of an item its workers could not finish (see :data:`Recorder`).

    After :meth:`run`, :attr:`book` holds the workers' descriptions and deaths.
    """

    def __init__(self, backend: WorkerBackend, spec: WorkerSpec, size: int, record: Recorder) -> None:
        self.backend = backend
        self.spec = spec
        self.size = size
        self.record = record
        self.book = WorkerBook()
        self._pending: dict[asyncio.Future[Any], Call] = {}
        self._window = DispatchWindow(iter(()))
        self._progress: Progress | None = None
        self._spared: set[tuple[str, int]] = set()
        self._log = structlog.get_logger("runner")
        self._looked_at = time.monotonic()
        self._writing = False

    async def start(self, solution: str) -> None:
        """Start the workers and wait until one of them has built the solution (named ``solution`` in messages),
        so that a solution that cannot be built on a worker stops the run before it writes anything.

        Raises:
            ConfigError: the solution cannot be built on a worker, or workers kept dying while starting.
            ResourcesBusy: no worker got its resources within ``spec.placement_timeout`` seconds.
        """
        self._solution = solution
        self._looked_at = time.monotonic()
        for _ in range(self.size):
            self._start_worker()
        while not self.book.any_ready:
            if self.book.deaths >= self.size * self.spec.max_attempts:
                raise ConfigError(f"{self.book.deaths} {self.backend.worker_label}s died while starting, before any "
                                  "could run an item; check the workers' logs (out of memory? a crash on import?)")
            # Only describe (and watch) calls are pending: a worker that dies starting is replaced, one that cannot
            # build the solution raises.
            await self._next_answers()

    async def run(self, plan: Iterator[WorkItem], progress: Progress) -> None:
        """Run every item of ``plan`` on the started pool and feed ``progress`` one acknowledgement per item (and
        each item's departures, :meth:`Progress.sent`).

        Raises:
            ConfigError: the solution cannot be built on a worker.
            StorageError: a worker cannot write a record (the run stops; finished records stay).
            RunStopped: the model server fails every call the same way (``progress`` raises it).
        """
        self._window = DispatchWindow(plan, self.spec.max_concurrency)
        self._progress = progress
        self._writing = True
        while True:
            for worker in list(self.book.workers):
                for batch in self._window.batches_for(worker):
                    self._submit(worker, Call(worker, "run", batch))
            kinds = {call.kind for call in self._pending.values()}
            # Run calls pending, or work left while workers not started (or suspect) may still come up: a pool
            # larger than the cluster fits now waits on them instead of ending or spinning.
            if "run" not in kinds and (self._window.finished or not kinds & {"describe", "probe"}):
                break
            await self._next_answers()

    async def _next_answers(self) -> None:
        """Account for the next answers; while workers wait to start, say every :data:`WAIT_LOG_S` seconds what
        they wait for, and stop the run once none runs and they waited past ``spec.placement_timeout``.

        Raises:
            ResourcesBusy: before the run writes anything (from :meth:`start`); WorkersLost: after.
        """
        timeout = max(0.0, self._looked_at + WAIT_LOG_S - time.monotonic()) if self.book.pending else None
        done, _ = await asyncio.wait(self._pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for future in done:
            await self._collect(future)
        if not self.book.pending:
            self._looked_at = time.monotonic()
        elif time.monotonic() - self._looked_at >= WAIT_LOG_S:
            await self._look_at_waiting()

    async def _look_at_waiting(self) -> None:
        """The ``pool.waiting`` line, and the stop past the placement bound (see :meth:`_next_answers`)."""
        self._looked_at = now = time.monotonic()
        pending = self.book.pending
        waited = now - min(worker.since for worker in pending)
        seen = await asyncio.to_thread(self.backend.waiting, [worker.handle for worker in pending])
        unplaced = seen.get("unplaced")
        running = sum(1 for worker in self.book.workers if worker.state is not WorkerState.PENDING)
        wants = resources_text(seen.get("wants", {})) or "nothing"
        free = resources_text(seen.get("free", {})) or "none of it"
        counted = unplaced if unplaced is not None else "?"
        self._log.warning(
            "pool.waiting", waiting=len(pending), unplaced=unplaced, running=running, waited_s=round(waited, 1),
            wants=seen.get("wants"), free=seen.get("free"),
            detail=f"{len(pending)} {self.backend.worker_label}s wait to start ({counted} of them for resources: each "
                   f"asks for {wants}; free now: {free})")
        bound = self.spec.placement_timeout
        if running or bound is None or waited < bound or unplaced == 0:
            return
        what = (f"no {self.backend.worker_label} got the resources it asks for ({wants}) within --placement-timeout "
                f"{bound:g} s; free now: {free}: other jobs or runs hold them, or no node has them yet")
        if self._writing:
            raise WorkersLost(f"{what}; the records written so far are kept, and the same command resumes once they "
                              "are free")
        raise ResourcesBusy(f"{what}; nothing was written; run the same command once they are free, lower the spec, "
                            "or raise --placement-timeout (0: no bound)")

    def close(self) -> None:
        """Stop waiting for answers and stop every worker of the pool."""
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        # Workers that started (pending ones hold nothing yet; dead ones cannot answer).
        self.backend.release([worker.handle for worker in self.book.workers
                              if worker.state not in (WorkerState.PENDING, WorkerState.DEAD)])
        for worker in self.book.workers:
            self.backend.kill(worker.handle)
        self.book.workers.clear()

    def _start_worker(self) -> None:
        worker = self.book.add(self.backend.start_worker())
        self._submit(worker, Call(worker, "describe"))

    def _submit(self, worker: PoolWorker, call: Call) -> None:
        if call.kind == "run":
            sent = self.backend.run(worker.handle, call.items)
        elif call.kind == "watch":
            sent = self.backend.watch(worker.handle)
        else:
            sent = self.backend.describe(worker.handle)
        call.future = asyncio.ensure_future(sent)
        self._pending[call.future] = call
        worker.calls.append(call)
        if call.kind == "run":
            worker.in_flight += len(call.items)
            if self._progress is not None:
                for item, _, _ in call.items:
                    self._progress.sent((item.task.id, item.repeat))

    def _forget(self, call: Call) -> None:
        """Take ``call`` off the books (answered, or given up with its worker)."""
        if call.future is not None:
            self._pending.pop(call.future, None)
        if call in call.worker.calls:
            call.worker.calls.remove(call)
            if call.kind == "run":
                call.worker.in_flight -= len(call.items)
                call.worker.isolated = False

    async def _collect(self, future: asyncio.Future[Any]) -> None:
        """Account for one finished call: acknowledgements, a description, an alarm, or a dead worker."""
        call = self._pending.get(future)
        if call is None:
            return  # given up with its worker while other answers were being accounted for
        worker = call.worker
        try:
            answer = future.result()
        except WorkerBuildFailed as exc:
            raise ConfigError(
                f"the solution {self._solution!r} could not be built on a {self.backend.worker_label} ({exc}); "
                "check that its module is importable on the workers, or run with --sequential to build it in this "
                "process (a debugger can step through it there)"
            ) from None
        except WorkerLost as exc:
            await self._lose(worker, str(exc))
            return
        self._forget(call)
        if call.kind == "describe":
            self.book.ready(worker, answer)
            self._log.info("worker.ready", worker=worker.index, **answer)
            self._submit(worker, Call(worker, "watch"))
            return
        if call.kind == "watch":
            await self._alarm(worker, answer)
            return
        if self.book.answered(worker):
            self._log.info("worker.cleared", worker=worker.index, node=worker.node,
                           detail="a suspect worker answered; it gets work again")
        if call.kind == "run":
            self._acknowledge(call, answer)

    def _acknowledge(self, call: Call, answer: tuple[list[ItemResult], float]) -> None:
        assert self._progress is not None
        acks, busy = answer
        for (item, _, _), result in zip(call.items, acks):
            self._progress.acknowledge(result, item=(item.task.id, item.repeat))
        self._window.throughput.observe(len(acks), busy)

    async def _alarm(self, worker: PoolWorker, alarm: dict[str, Any]) -> None:
        """``worker`` must be replaced: record the item it blames, requeue its others without an attempt charged (an
        alarm that blames no single item counts as a death)."""
        key = (alarm.get("task_id"), alarm.get("repeat"))
        blamed = next(((item, attempt) for call in worker.run_calls for item, attempt, _ in call.items
                       if (item.task.id, item.repeat) == key), None)
        self._log.warning("worker.alarm", worker=worker.index, kind=alarm["kind"], reason=alarm["message"],
                          detail="the worker is replaced" + ("; its other items run again, no attempt charged"
                                                             if blamed else ""))
        if blamed is None:
            await self._lose(worker, alarm["message"])
            return
        item, attempt = blamed
        identity = {key: worker.description[key] for key in _IDENTITY if key in worker.description}
        fault = Fault(alarm["status"], alarm["error_type"], alarm["message"], identity)
        status = await self.record(item, attempt, fault)
        assert self._progress is not None
        self._progress.advance(status, item=(item.task.id, item.repeat))
        await self._lose(worker, alarm["message"], charge=False, blamed=(item.task.id, item.repeat))

    async def _lose(self, worker: PoolWorker, reason: str, *, charge: bool = True,
                    blamed: tuple[str, int] | None = None, node_dead: bool = False) -> None:
        """``worker`` is gone (it died, or is killed here for an alarm): replace it and send its items out again.

        Args:
            reason: one line, for the log and for the record of an item given up.
            charge: charge the items of its running calls an attempt (a death); ``False``: requeue every item
                (the worker is killed for ``blamed``'s fault, already recorded).
            blamed: the item the alarm recorded (not sent again).
            node_dead: the cluster already said its node is dead (its peers are being handled).
        """
        if not self.book.dead(worker):
            return
        # Answers that arrived before the death was seen count as answered, and the calls after them ran.
        answered = [call for call in worker.run_calls if _succeeded(call.future)]
        for call in answered:
            self._forget(call)
        running = running_calls(worker, self.spec.max_concurrency) if charge else []
        calls = list(worker.calls)
        self._log.warning("worker.died" if charge else "worker.replaced", worker=worker.index, node=worker.node,
                          reason=reason, in_flight=worker.in_flight,
                          detail="its items run again on other workers; a new worker replaces it")
        for call in calls:
            self._forget(call)
            if call.future is not None and not call.future.done():
                call.future.cancel()
        self.backend.kill(worker.handle)
        self._start_worker()
        for call in answered:
            assert call.future is not None
            self._acknowledge(call, call.future.result())
        for call in calls:
            if call.kind != "run":
                continue
            for item, attempt, _ in call.items:
                key = (item.task.id, item.repeat)
                if key == blamed:
                    continue
                if self._progress is not None:
                    self._progress.returned(key)
                if call not in running and (not charge or key not in self._spared):
                    if charge:
                        self._spared.add(key)
                    self._window.requeue(item, attempt)
                    continue
                self._spared.discard(key)
                if attempt < self.spec.max_attempts:
                    self._window.retry(item, attempt + 1)
                else:
                    fault = Fault("error", "WorkerDied", f"its worker died during each of {attempt} attempts "
                                  f"(last: {reason})")
                    status = await self.record(item, attempt, fault)
                    assert self._progress is not None
                    self._progress.advance(status, item=key)
        if charge and worker.node is not None and not node_dead:
            await self._suspect_node(worker.node)

    async def _suspect_node(self, node: str) -> None:
        """A worker of ``node`` died: ask the cluster about the node; its other workers are dead with it, or
        suspects until they answer a probe."""
        peers = self.book.on_node(node)
        if not peers:
            return
        if await asyncio.to_thread(self.backend.node_alive, node) is False:
            self._log.warning("node.lost", node=node, workers=len(peers),
                              detail="the cluster reports the node dead; its workers are replaced")
            for peer in peers:
                await self._lose(peer, f"its node {node} died", node_dead=True)
            return
        suspects = self.book.suspect(node)
        if suspects:
            self._log.warning("worker.suspect", node=node, workers=[peer.index for peer in suspects],
                              detail="a worker of their node died; they get no work until they answer a probe")
        for peer in suspects:
            self._submit(peer, Call(peer, "probe"))


def _succeeded(future: asyncio.Future[Any] | None) -> bool:
    """Whether ``future`` holds an answer (it finished without an exception)."""
    return future is not None and future.done() and not future.cancelled() and future.exception() is None
