"""A pool of workers fed from a bounded window of in-flight items, apart from any cluster.

Three parts, each testable alone (``tests/engine/test_pool.py`` drives them with fake workers, no Ray):

- :class:`~runner.engine.pool.workers.WorkerBook`: which workers are pending, ready, suspect or dead, on which node, and
  their calls in flight (:mod:`runner.engine.pool.workers`).
- :class:`~runner.engine.pool.dispatch.DispatchWindow`: which items go to a worker next and in calls of what size
  (:mod:`runner.engine.pool.dispatch`).
- :class:`WorkerPool`: the loop that starts workers through a :class:`WorkerBackend`, fills them from the windows
  (one per group of a :class:`~runner.engine.workload.Workload`: a run alone has one, a matrix one per placed model
  and one for the cells any worker runs), gives a drained worker another model to load
  (:mod:`runner.engine.pool.placement`), and accounts for each answer: acknowledgements, a description, a model
  loaded (or not), an alarm (a worker's event loop blocked, its memory over the limit), or a death.

What a fault costs:

- A worker dies: the items of its running calls (:func:`~runner.engine.pool.workers.running_calls`) are charged an
  attempt and retried alone; the items queued behind them are requeued at the same attempt, once: an item that is
  queued on a dying worker a second time is charged too. (A call counts as running by its place in the worker's
  queue; an older item still writing its record can hold that place while the item that killed the worker had
  already started, so an item that keeps being present at deaths is charged rather than requeued for ever.) After
  ``max_attempts`` charged deaths an item is recorded as a ``WorkerDied`` error. The worker is replaced, and its
  node's other workers become suspects: if the cluster says the node is dead (:meth:`WorkerBackend.node_alive`)
  they are treated as dead at once, otherwise each is probed and gets work again once it answers. Its model is
  placed again by the rule, on whichever worker drains first (the replacement starts holding none).
- A worker cannot load a model (its replica does not start): the model is not placed again until the workload adds
  its cells anew (a watch's next look), and if no other worker holds it, its cells stop (``load_failed``) while the
  other cells go on.
- A worker raises an alarm (:mod:`runner.engine.item.watchdog`): the blamed item is recorded (``timeout`` for a blocked
  event loop, ``error`` for memory), the worker is killed and replaced, and its other items are requeued without
  an attempt charged. An alarm that blames no single item counts as a death.

A :class:`WorkerBackend` is the cluster: :class:`~runner.engine.ray.backend.RayBackend` starts Ray actors. Example::

    pool = WorkerPool(RayBackend(spec, setup, hub), spec, size=4, record=record)
    try:
        await pool.start("my-solution")            # workers up, one has built the solution
        await pool.run(Workload.single(context, progress, iter(plan)))
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
from runner.engine.item.execute import Fault, ItemResult
from runner.engine.plan import WorkItem
from runner.engine.pool.dispatch import DispatchWindow
from runner.engine.pool.placement import ModelDemand, choose_model
from runner.engine.pool.workers import Batch, Call, PoolWorker, WorkerBook, WorkerState, running_calls
from runner.engine.progress import Progress
from runner.engine.workload import Workload

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

    def load(self, handle: Any, model: str, cells: dict[int, Any], replicas: tuple[Any, ...]) -> Awaitable[dict[str, Any]]:
        """Make the worker hold ``model`` to run ``cells`` (cell number -> its context), starting ``replicas``: what
        the load did (:meth:`WorkerCells.load <runner.engine.worker_cells.WorkerCells.load>`)."""
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
        self.loads: list[dict[str, Any]] = []
        self._pending: dict[asyncio.Future[Any], Call] = {}
        self._windows: dict[str | None, DispatchWindow] = {}
        self._work: Workload | None = None
        self._load_failures: dict[str, int] = {}
        self._spared: set[tuple[int, str, int]] = set()
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

    async def run(self, work: Workload) -> None:
        """Run every item of ``work`` on the started pool and feed each cell's progress one acknowledgement per item
        (and each item's departures, :meth:`Progress.sent`). A worker runs the items of the model it holds and those
        of cells that need no model; a worker with nothing in flight whose model has no pending item is given
        another model to load (:func:`~runner.engine.pool.placement.choose_model`). While ``work`` is open (a
        watch), the pool waits for new cells once every item ran.

        Raises:
            ConfigError: the solution cannot be built on a worker.
            StorageError: a worker cannot write a record (the run stops; finished records stay).
            RunStopped: the model server fails every call the same way (a cell's progress raises it).
        """
        self._work = work
        self._writing = True
        while True:
            self._take_groups()
            for worker in list(self.book.workers):
                for window in self._windows_of(worker):
                    for batch in window.batches_for(worker):
                        self._submit(worker, Call(worker, "run", batch))
                self._place(worker)
            kinds = {call.kind for call in self._pending.values()}
            # Run calls pending, or work left while workers not started (or suspect) may still come up: a pool
            # larger than the cluster fits now waits on them instead of ending or spinning.
            idle = not kinds & {"run", "load"}
            finished = all(window.finished for window in self._windows.values())
            if idle and (finished or not kinds & {"describe", "probe"}) and not work.open:
                break
            await self._next_answers()

    def _take_groups(self) -> None:
        """Windows for the groups of items added to the workload (a cell, a checkpoint of a watch)."""
        assert self._work is not None
        for model in list(self._work.groups):
            expected = self._expected(model)
            items = self._work.take_group(model)
            window = self._windows.get(model)
            if window is None:
                self._windows[model] = DispatchWindow(items, self.spec.max_concurrency, expected)
            else:
                window.extend(items, expected)
            if model is not None:
                self._load_failures.pop(model, None)  # added again (a watch's next look): it may load now

    def _expected(self, model: str | None) -> int | None:
        """The items the cells of ``model`` still have to run (``None``: unknown)."""
        assert self._work is not None
        totals = [cell.progress.total for cell in self._work.cells.values()
                  if cell.model == model and cell.stopped is None]
        return None if any(total is None for total in totals) else sum(total or 0 for total in totals)

    def _windows_of(self, worker: PoolWorker) -> list[DispatchWindow]:
        """The windows whose items ``worker`` may take now: its model's, and that of the cells any worker runs."""
        if worker.loading is not None:
            return []
        models = (worker.model, None) if worker.model is not None else (None,)
        return [self._windows[model] for model in models if model in self._windows]

    def _window_of(self, item: WorkItem) -> DispatchWindow | None:
        """The window ``item`` belongs to (``None``: its model's window was given up, the item is dropped)."""
        assert self._work is not None
        return self._windows.get(self._work.cells[item.cell].model)

    def _place(self, worker: PoolWorker) -> None:
        """Give ``worker`` a model to load when placement says so (see :mod:`runner.engine.pool.placement`)."""
        work = self._work
        assert work is not None
        if not work.models or worker.state is not WorkerState.READY or worker.loading or worker.in_flight:
            return
        demands = []
        for model, placed in work.models.items():
            window = self._windows.get(model)
            if window is None or self._load_failures.get(model):
                continue
            holders = sum(1 for other in self.book.workers if other is not worker and other.state is not
                          WorkerState.DEAD and model in (other.model, other.loading))
            demands.append(ModelDemand(model, window.pending, holders, placed.baseline, placed.step, placed.order))
        choice = choose_model(worker.model, demands, newest_first=work.newest_first)
        if choice is None or choice == worker.model:
            return
        contexts, replicas = work.load_of(choice)
        if not contexts:
            return
        worker.loading = choice
        self._log.info("worker.load", worker=worker.index, model=choice, previous=worker.model,
                       cells=sorted(contexts), detail="the worker takes this model (most pending items per worker)")
        self._submit(worker, Call(worker, "load", model=choice), contexts, replicas)

    async def _next_answers(self) -> None:
        """Account for the next answers; while workers wait to start, say every :data:`WAIT_LOG_S` seconds what
        they wait for, and stop the run once none runs and they waited past ``spec.placement_timeout``.

        Raises:
            ResourcesBusy: before the run writes anything (from :meth:`start`); WorkersLost: after.
        """
        timeout = max(0.0, self._looked_at + WAIT_LOG_S - time.monotonic()) if self.book.pending else None
        waiting: set[asyncio.Future[Any]] = set(self._pending)
        changed = None
        if self._work is not None:
            # New cells (a watch's checkpoint) wake the pool as an answer does.
            changed = asyncio.ensure_future(self._work.changed.wait())
            waiting.add(changed)
        try:
            done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if changed is not None:
                changed.cancel()
        if self._work is not None:
            self._work.changed.clear()
        for future in done:
            if future is not changed:
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

    def _submit(self, worker: PoolWorker, call: Call, *load: Any) -> None:
        if call.kind == "run":
            sent = self.backend.run(worker.handle, call.items)
        elif call.kind == "watch":
            sent = self.backend.watch(worker.handle)
        elif call.kind == "load":
            assert call.model is not None
            sent = self.backend.load(worker.handle, call.model, *load)
        else:
            sent = self.backend.describe(worker.handle)
        call.future = asyncio.ensure_future(sent)
        self._pending[call.future] = call
        worker.calls.append(call)
        if call.kind == "run":
            worker.in_flight += len(call.items)
            for item, _, _ in call.items:
                self._progress(item).sent((item.task.id, item.repeat))

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
        if call.kind == "load":
            self._loaded(worker, call, answer)
            return
        if self.book.answered(worker):
            self._log.info("worker.cleared", worker=worker.index, node=worker.node,
                           detail="a suspect worker answered; it gets work again")
        if call.kind == "run":
            self._acknowledge(call, answer)

    def _acknowledge(self, call: Call, answer: tuple[list[ItemResult], float]) -> None:
        acks, busy = answer
        for (item, _, _), result in zip(call.items, acks):
            self._progress(item).acknowledge(result, item=(item.task.id, item.repeat))
        window = self._window_of(call.items[0][0]) if call.items else None
        if window is not None:
            window.throughput.observe(len(acks), busy)

    def _progress(self, item: WorkItem) -> Progress:
        """The progress of ``item``'s cell."""
        assert self._work is not None
        return self._work.progress(item.cell)

    def _loaded(self, worker: PoolWorker, call: Call, report: dict[str, Any]) -> None:
        """``worker`` answered a load: it holds the model, or none (its replica could not start: the model is not
        placed again in this round, and with no other worker holding it its cells stop)."""
        assert self._work is not None and call.model is not None
        model, worker.loading = call.model, None
        self.loads.append({**report, "worker": worker.index, "node": worker.node})
        for cell, why in report.get("failed", {}).items():
            self._work.stop_cell(int(cell), why)
        if report.get("error") is None:
            worker.model = model
            self._log.info("worker.loaded", worker=worker.index, model=model, seconds=report.get("seconds"),
                           replica_starts=report.get("replica_starts"), swaps=report.get("swaps"),
                           builds=report.get("builds"))
            return
        worker.model = None
        self._load_failures[model] = self._load_failures.get(model, 0) + 1
        holders = [other for other in self.book.workers if other.model == model or other.loading == model]
        self._log.warning("worker.load_failed", worker=worker.index, model=model, error=report["error"],
                          detail="the model is not placed again in this round" + ("" if holders else
                                                                                  "; its cells stop (load_failed)"))
        if not holders:
            self._windows.pop(model, None)
            for index, cell in self._work.cells.items():
                if cell.model == model:
                    self._work.stop_cell(index, f"load_failed: {report['error']}")

    async def _alarm(self, worker: PoolWorker, alarm: dict[str, Any]) -> None:
        """``worker`` must be replaced: record the item it blames, requeue its others without an attempt charged (an
        alarm that blames no single item counts as a death)."""
        key = (alarm.get("cell", 0), alarm.get("task_id"), alarm.get("repeat"))
        blamed = next(((item, attempt) for call in worker.run_calls for item, attempt, _ in call.items
                       if item.key == key), None)
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
        self._progress(item).advance(status, item=(item.task.id, item.repeat))
        await self._lose(worker, alarm["message"], charge=False, blamed=item.key)

    async def _lose(self, worker: PoolWorker, reason: str, *, charge: bool = True,
                    blamed: tuple[int, str, int] | None = None, node_dead: bool = False) -> None:
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
                key, progress_key = item.key, (item.task.id, item.repeat)
                if key == blamed:
                    continue
                progress = self._progress(item)
                progress.returned(progress_key)
                window = self._window_of(item)
                if window is None:
                    continue  # its model's cells stopped: it runs on a later invocation
                if call not in running and (not charge or key not in self._spared):
                    if charge:
                        self._spared.add(key)
                    window.requeue(item, attempt)
                    continue
                self._spared.discard(key)
                if attempt < self.spec.max_attempts:
                    window.retry(item, attempt + 1)
                else:
                    fault = Fault("error", "WorkerDied", f"its worker died during each of {attempt} attempts "
                                  f"(last: {reason})")
                    status = await self.record(item, attempt, fault)
                    progress.advance(status, item=progress_key)
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
