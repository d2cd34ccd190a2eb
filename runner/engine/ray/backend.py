"""Ray under a :class:`~runner.engine.pool.pool.WorkerPool`: each worker is an :class:`~runner.engine.ray.worker.EvalWorker`
actor with the :class:`WorkerSpec`'s resources.

The run's :class:`~runner.engine.workload.WorkerSetup` (a run alone: its :class:`RunContext`, the benchmark, solution
recipe, store and settings) goes to Ray's object store once, and so does each matrix cell's context, sent with the
model that runs it (:meth:`RayBackend.load`); each actor builds a solution once; calls carry only task data. Ray's errors become the pool's: a dead actor (killed
process, lost node, out of memory) is :class:`WorkerLost`, an actor whose constructor raised is
:class:`WorkerBuildFailed`, and a :class:`RunnerError` raised inside a call (a store that cannot be written, or
stayed unavailable past the run's outage limit) is raised as it is; items a worker cannot unpickle (they name a
module it cannot import) stop the run in one line (:class:`RunStopped`). A node's state comes from the GCS
(``ray.nodes()``), which works without the dashboard.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import ray
from ray.exceptions import OutOfMemoryError, RayActorError, RaySystemError, RayTaskError

from runner import log
from runner.core.config import WorkerSpec
from runner.core.errors import CodeImportError, ReplicaStartError, RunnerError, RunStopped, exception_line
from runner.engine.ray import cluster as ray_cluster
from runner.engine.run_context import RunContext
from runner.engine.workload import WorkerSetup
from runner.serving import ReplicaSpec
from runner.engine.pool.dispatch import MAX_BATCH
from runner.engine.pool.pool import WorkerBuildFailed, WorkerLost
from runner.engine.ray.limiter import RemoteTraffic
from runner.engine.ray.worker import CONTROL_GROUP, EvalWorker
from runner.engine.pool.workers import Batch


RELEASE_S = 60.0
"""Seconds the driver waits for its workers to stop their model replicas (SIGTERM, a grace, SIGKILL) and keep
their logs, before it kills them."""


class RayBackend:
    """Starts and calls the actors of one run.

    Args:
        spec: the workers' resources and concurrency.
        setup: what every worker gets, put in Ray's object store once for every actor.
        traffic: the run's traffic hub, which every actor is built with (it finds the run's limiter actor, started
            after the workers, on first use).
        log_format: the actors' structlog format.

    Must be created after ``ray.init``.
    """

    worker_label = "Ray worker"

    def __init__(self, spec: WorkerSpec, setup: WorkerSetup, traffic: RemoteTraffic,
                 log_format: log.LogFormat = "json", serves: bool | None = None) -> None:
        # The control group holds describe (or a probe) and watch: they answer while items hold the default loop.
        self._actor_class = ray.remote(concurrency_groups={CONTROL_GROUP: 4})(EvalWorker).options(
            # Room for every call the window can have on one actor (2 * max(batch, concurrency) items, one or
            # more per call), so none waits in Ray's queue instead of the actor's semaphore.
            **ray_cluster.actor_options(spec, 2 * max(MAX_BATCH, spec.max_concurrency))
        )
        self._spec = spec
        self._serves = bool(setup.pinned) if serves is None else serves
        self._setup_ref = ray.put(setup)
        self._cell_refs: dict[int, Any] = {}
        self._traffic = traffic
        self._turns: dict[Any, int] = {}
        memory_limit = int(spec.memory_limit) if spec.memory_limit is not None else None
        self._options = {"max_concurrency": spec.max_concurrency, "memory_limit": memory_limit,
                         "log_format": log_format}

    def start_worker(self) -> Any:
        """Create one actor (Ray starts it when resources allow), with the run's context and traffic hub."""
        return self._actor_class.remote(self._setup_ref, traffic=self._traffic, **self._options)

    def describe(self, handle: Any) -> Any:
        """The actor's identity and assigned resources (its first answer, and a suspect's probe)."""
        return _pool_errors(handle.describe.remote())

    def run(self, handle: Any, batch: Batch) -> Any:
        """Run ``batch`` on the actor, which starts its calls in the order they are sent here."""
        turn = self._turns.get(handle, 0)
        self._turns[handle] = turn + 1
        return _pool_errors(handle.run.remote(batch, turn))

    def load(self, handle: Any, model: str, cells: dict[int, RunContext], replicas: tuple[ReplicaSpec, ...]) -> Any:
        """Make the actor hold ``model`` to run ``cells`` (each context put in the object store once)."""
        refs = {}
        for index, context in cells.items():
            if index not in self._cell_refs:
                self._cell_refs[index] = ray.put(context)
            refs[index] = self._cell_refs[index]
        return _pool_errors(handle.load.remote(model, refs, replicas))

    def watch(self, handle: Any) -> Any:
        """Answers when the actor's watchdog raises an alarm."""
        return _pool_errors(handle.watch.remote())

    def node_alive(self, node: str) -> bool | None:
        """Whether the GCS counts ``node`` (a hex node id) alive; ``None`` if it does not know the node."""
        for entry in ray.nodes():
            if entry.get("NodeID") == node:
                return bool(entry.get("Alive"))
        return None

    def waiting(self, handles: list[Any]) -> dict[str, Any]:
        """What the actors ``handles`` that have not answered yet wait for: ``unplaced``, those the GCS still holds
        in ``PENDING_CREATION`` (no node has their resources free; ``None`` if the GCS's actor table cannot be
        read), ``wants`` (one worker's resources) and ``free`` (the cluster's free amount of each, now)."""
        wants = ray_cluster.demand(self._spec)
        free = ray.available_resources()
        return {"unplaced": _unplaced(handles), "wants": wants,
                "free": {name: round(free.get(name, 0.0), 3) for name in wants}}

    def release(self, handles: list[Any]) -> None:
        """Let the actors stop their model replicas and keep their logs in the run's ``replicas/``, all at once,
        waiting at most :data:`RELEASE_S` seconds (before they are killed); nothing when the run serves no model."""
        if not self._serves or not handles:
            return
        pending = [handle.shutdown.remote() for handle in handles]
        with contextlib.suppress(Exception):
            ray.wait(pending, num_returns=len(pending), timeout=RELEASE_S)

    def kill(self, handle: Any) -> None:
        """Kill the actor, without restart; nothing if it is gone."""
        self._turns.pop(handle, None)
        try:
            ray.kill(handle, no_restart=True)
        except (RayActorError, ValueError):
            pass


def _unplaced(handles: list[Any]) -> int | None:
    """How many of the actors ``handles`` the GCS holds in ``PENDING_CREATION`` with no worker process yet (one
    being created has its process id); ``None`` if its actor table cannot be read (``ray._private.state.actors``:
    the GCS's own table, which needs no dashboard; a private API, read defensively)."""
    try:
        from ray._private import state

        entries = [state.actors(handle._actor_id.hex()) or {} for handle in handles]
        return sum(1 for entry in entries if entry.get("State") == "PENDING_CREATION" and not entry.get("Pid"))
    except Exception:  # noqa: BLE001 - a message's detail; never a reason to stop the run
        return None


async def _pool_errors(ref: Any) -> Any:
    """Await ``ref``, turning Ray's errors into the pool's (see the module's docstring)."""
    try:
        return await asyncio.wrap_future(ref.future())
    except (RayActorError, OutOfMemoryError) as exc:
        if isinstance(exc, RayActorError) and exc.actor_init_failed:
            line = exception_line(exc, limit=2000)
            # Ray keeps the constructor's exception as text only: a model that could not start, or the run's own code
            # that cannot be imported there (found while its arguments were unpickled), is that error again (exit
            # status 2, its own line), not a solution that could not be built.
            for error in (ReplicaStartError, CodeImportError):
                _, marker, message = line.partition(f"{error.__name__}: ")
                if marker:
                    raise error(message) from None
            raise WorkerBuildFailed(exception_line(exc)) from None
        raise WorkerLost(exception_line(exc)) from None
    except RayTaskError as exc:
        if isinstance(exc.cause, RunnerError):
            raise exc.cause from None
        if isinstance(exc.cause, RaySystemError):
            # The call's arguments (its items) could not be unpickled on the worker: none of them ran there.
            raise RunStopped(
                f"a Ray worker could not unpickle the items sent to it ({exception_line(exc.cause)}): they hold "
                "code the workers cannot import; install it where the workers run, put it in the folder the run "
                "sends (the --solution's or -b module's folder, -B include_path), or run with --sequential; the "
                "records written so far are kept, and the same command resumes once this is fixed") from None
        raise

