"""What one process holds to run a workload's items: each cell's built solution, the replicas it keeps for its life,
and the one placed model it holds (:mod:`runner.engine.pool.placement`), loaded and released as placement says.

Both executors use it: each Ray worker (:class:`~runner.engine.ray.worker.EvalWorker`) and the driver when sequential
(:class:`~runner.engine.sequential.SequentialExecutor`). A model load is the model's replicas started (or, where the
engine reloads weights in place, the held replica swapped to the new checkpoint: :meth:`ServedModels.swap
<runner.serving.ServedModels.swap>`) and the solutions of its cells built (lm-eval's ``HFLM`` loads in that build,
once per process for every cell of the model: :mod:`runner.core.loaded`). Example::

    cells = WorkerCells(setup, traffic, identity, gpu_ids=ray.get_gpu_ids(), label="worker-3f9a0c1d")
    cells.start()                              # pinned replicas ready, the setup's cells built (or raise)
    report = cells.load(model, {3: context}, replicas)   # blocking: the held model released, this one loaded
    await cells.ready()                        # before each batch: every replica ready (one restarting: wait)
    site = cells.site(3)                       # the ItemSite of cell 3's items
    cells.stop()                               # and the replicas' logs go to their run's replicas/
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Sequence
from typing import Any

import structlog

from runner.core import loaded
from runner.core.errors import ConfigError, ReplicaStartError, RunnerError, exception_line
from runner.engine.item.call_solution import Solution
from runner.engine.item.execute import ItemSite
from runner.engine.replicas import WorkerReplicas
from runner.engine.run_context import RunContext
from runner.engine.workload import WorkerSetup
from runner.serving import ReplicaSpec, ReplicaStatus
from runner.traffic.control import TrafficControl


def build_solution(context: RunContext, wrap: bool = True) -> Solution:
    """The solution of ``context``'s run, built once (:meth:`SolutionSpec.build`).

    Args:
        wrap: turn what the build raises into one :class:`ConfigError` line (``False``: raise it as it is; a Ray
            worker's constructor does, and the driver words the line, :mod:`runner.engine.pool.pool`).

    Raises:
        ConfigError: building it raised (one line: the solution and the exception's type and first line); a
            :class:`RunnerError` it raised is passed on as it is.
    """
    if not wrap:
        return Solution(context.solution.build(context.benchmark))
    try:
        return Solution(context.solution.build(context.benchmark))
    except RunnerError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a user's constructor raises becomes one line
        raise ConfigError(f"the solution {context.solution.display!r} could not be built "
                          f"({exception_line(exc)})") from None


class WorkerCells:
    """The cells one process runs and the models it holds (see the module's docstring).

    Args:
        setup: what every worker gets (its cells, pinned replicas, traffic settings).
        traffic: this process's model traffic.
        identity: the worker's identity, stored in each record.
        gpu_ids: the process's GPUs (empty: the CPU), shared by its replicas.
        label: the worker's name in the replicas' log files (``worker-<actor id>``, ``driver``).
        slots: bounds the solution calls in flight across every cell (``None``: no bound).
        sync_in_thread: run sync solutions in threads (see :class:`ItemSite`).
        wrap_errors: what building the setup's solutions raises becomes one :class:`ConfigError` line (``False``:
            raised as it is, see :func:`build_solution`).
    """

    def __init__(self, setup: WorkerSetup, traffic: TrafficControl, identity: dict[str, Any], *,
                 gpu_ids: Sequence[str | int] = (), label: str = "driver", slots: asyncio.Semaphore | None = None,
                 sync_in_thread: bool = True, wrap_errors: bool = True) -> None:
        self.setup = setup
        self.traffic = traffic
        self.identity = identity
        self.gpu_ids = list(gpu_ids)
        self.label = label
        self.slots = slots
        self.sync_in_thread = sync_in_thread
        self.wrap_errors = wrap_errors
        self.pinned = WorkerReplicas(setup.pinned, setup.model_env, setup.log_store, self.gpu_ids, label) \
            if setup.pinned else None
        self.held: str | None = None
        self.replicas: WorkerReplicas | None = None
        self._contexts: dict[int, RunContext] = {}
        self._solutions: dict[int, Solution] = {}
        self._sites: dict[int, ItemSite] = {}
        self._placed: set[int] = set()
        self._log = structlog.get_logger("runner")

    def start(self) -> None:
        """Start the pinned replicas (blocking, until ready) and build the solution of every cell of the setup.

        Raises:
            ReplicaStartError: a pinned replica could not start (the server's own line; exit status 2).
            ConfigError: a solution could not be built (exit status 2: nothing is written yet).
        """
        if self.pinned is not None:
            self.pinned.start()
        try:
            for cell, context in self.setup.cells.items():
                self._solutions[cell] = build_solution(context, self.wrap_errors)
                self._contexts[cell] = context
        except BaseException:
            self.stop(keep_logs=False)
            raise

    def load(self, model: str, cells: dict[int, RunContext], replicas: tuple[ReplicaSpec, ...]) -> dict[str, Any]:
        """Hold ``model`` to run ``cells``: release the model held now (its replicas stopped, or swapped in place
        to ``model``'s weights where the engine can), start ``replicas`` and build each cell's solution. Blocking.

        Returns:
            what the load did, for the driver's count of loads (``matrix.json``): ``model``, ``replica_starts``,
            ``swaps``, ``builds`` (models loaded in the worker's own process, such as lm-eval's ``HFLM``),
            ``seconds``, ``error`` (the replica could not start, or the model this process loads itself could not
            be built: the engine's own line; nothing is held then) and ``failed`` (cell number -> why its solution
            could not be built, beside a replica that started).
        """
        started, builds_before = time.monotonic(), loaded.builds()
        report: dict[str, Any] = {"model": model, "replica_starts": 0, "swaps": 0, "builds": 0, "error": None,
                                  "failed": {}}
        swapped = bool(replicas) and self.replicas is not None and self.replicas.can_swap(replicas)
        self._release(keep_replicas=swapped)
        try:
            if swapped:
                assert self.replicas is not None
                try:
                    self.replicas.swap(replicas)
                    report["swaps"] = len(replicas)
                except ReplicaStartError as exc:
                    # The reload failed in place: the old server is stopped; a fresh start is the way left.
                    self._log.warning("replica.swap_failed", model=model, error=str(exc)[:300],
                                      detail="its replica starts afresh")
                    self.replicas.stop()
                    self.replicas = None
                    swapped = False
            if not swapped and replicas:
                self.replicas = WorkerReplicas(replicas, self.setup.model_env, self.setup.log_store, self.gpu_ids,
                                               self.label)
                self.replicas.start()
                report["replica_starts"] = len(replicas)
        except ReplicaStartError as exc:
            if self.replicas is not None:
                self.replicas.stop()
            self.replicas = None
            report["error"] = str(exc)
            report["seconds"] = round(time.monotonic() - started, 3)
            return report
        self.held = model
        for cell, context in cells.items():
            try:
                self._solutions[cell] = build_solution(context)
            except RunnerError as exc:
                report["failed"][cell] = f"build_failed: {exc}"
                continue
            self._contexts[cell] = context
            self._placed.add(cell)
        report["builds"] = loaded.builds() - builds_before
        report["seconds"] = round(time.monotonic() - started, 3)
        if report["failed"] and not replicas:
            # The model lives in this process (lm-eval's HFLM): its build is its load. A build that failed (a
            # checkpoint's config.json cut short, weights missing) is the model's load failure, as a replica's start
            # is: nothing is held, its cells are load_failed, and a watch tries again at its next look.
            report["error"] = next(iter(report["failed"].values())).removeprefix("build_failed: ")
            report["failed"] = {}
            self._release(keep_replicas=False)
        return report

    def _release(self, keep_replicas: bool) -> None:
        """Release the held model: its cells' solutions (and the models they loaded in this process), and its
        replicas unless they are swapped in place."""
        for cell in self._placed:
            self._solutions.pop(cell, None)
            self._sites.pop(cell, None)
            self._contexts.pop(cell, None)
        self._placed.clear()
        loaded.release()
        gc.collect()
        if self.replicas is not None and not keep_replicas:
            self.replicas.stop()
            self.replicas = None
        self.held = None

    def site(self, cell: int) -> ItemSite:
        """The :class:`ItemSite` of cell ``cell``'s items (built on first use).

        Raises:
            KeyError: this process does not run cell ``cell`` (its model is not held here).
        """
        site = self._sites.get(cell)
        if site is None:
            site = ItemSite(self._contexts[cell], self._solutions[cell], self.traffic, self.identity, self.slots,
                            sync_in_thread=self.sync_in_thread)
            self._sites[cell] = site
        return site

    def runs(self, cell: int) -> bool:
        """Whether this process runs cell ``cell`` now."""
        return cell in self._solutions

    async def ready(self) -> None:
        """Return once every replica is ready: at once, or after a restart (items wait, none is charged for it).

        Raises:
            ReplicaFailed: a replica failed past its restarts (exit status 3: the same command resumes).
        """
        for replicas in (self.pinned, self.replicas):
            if replicas is not None:
                await replicas.ready()

    def statuses(self) -> list[ReplicaStatus]:
        """Each replica's state, restarts, URL and log (pinned first)."""
        return [status for replicas in (self.pinned, self.replicas) if replicas is not None
                for status in replicas.statuses()]

    def stop(self, keep_logs: bool = True) -> None:
        """Stop every replica (their logs go to the run's ``replicas/`` with ``keep_logs``) and drop the solutions.
        Safe to call twice."""
        self._sites.clear()
        self._solutions.clear()
        loaded.release()
        for replicas in (self.replicas, self.pinned):
            if replicas is not None:
                replicas.stop(keep_logs)
