"""The Ray executor: attach to a cluster (or start an embedded Ray), size a pool of actors, run the plan on it.

Ray starts (or is attached to) only when there is work, so resuming a finished run costs no Ray start-up; when there
is, :meth:`RayExecutor.start` attaches and sizes the pool before the run writes anything, so a spec no node fits or a
store the workers cannot reach is refused with the run directory untouched.

Example::

    executor = RayExecutor(WorkerSpec(num_gpus=1, max_concurrency=8))    # as many workers as the cluster fits
    outcome = await execute_run(request, executor)    # preflight(); start(setup, traffic, n): attach, size;
                                                      # execute(workload)
    executor.workers                       # each actor's host, pid, node, actor id and assigned resources

``execute_run(request)`` builds the same executor from ``request.settings`` (``executor: ray``, the default).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from runner import log
from runner.core.config import RunSettings, WorkerSpec
from runner.core.errors import ConfigError
from runner.engine.item.execute import Fault, record_fault
from runner.engine.plan import WorkItem
from runner.engine.pool.pool import WorkerPool
from runner.engine.ray import cluster as ray_cluster
from runner.engine.workload import WorkerSetup, Workload
from runner.storage.store import ResultStore
from runner.traffic.control import TrafficControl

if TYPE_CHECKING:
    from runner.engine.ray.limiter import RemoteTraffic


class RayExecutor:
    """Run items on a pool of Ray actors built from a :class:`WorkerSpec` (see :mod:`runner.engine.pool.pool` and
    :mod:`runner.engine.ray.backend`).

    Args:
        spec: worker resources and behaviour (``num_workers`` ``None``: as many as the cluster's nodes fit, never
            more than there are items).
        address: the cluster (``host:port`` of the GCS, ``ray://...``, ``auto``); ``None``: ``RAY_ADDRESS`` if
            set, else a new embedded Ray on this machine, shut down when the run ends.
        log_format: the workers' structlog format (default: JSON lines, which Ray forwards to the driver).

    After a run, :attr:`size` is the number of workers the pool was given, :attr:`workers` holds what each actor
    that Ray started reported about itself (host, pid, node and actor ids, and the resources Ray assigned to it; a
    worker still waiting for resources when the work ran out is not there), and :attr:`deaths` the number of
    workers that died.
    """

    name = "ray"

    def __init__(self, spec: WorkerSpec | None = None, address: str | None = None,
                 log_format: log.LogFormat = "json") -> None:
        self.spec = spec or WorkerSpec()
        self.address = address
        self.log_format = log_format
        self.workers: list[dict[str, Any]] = []
        self.deaths = 0
        self._pool: WorkerPool | None = None
        self._hub: RemoteTraffic | None = None
        self._served = 0
        self._started_ray = False
        self._work: Workload | None = None
        self._loads: list[dict[str, Any]] = []
        self.size = 0

    @classmethod
    def from_settings(cls, settings: RunSettings) -> RayExecutor:
        """The executor of a run with ``settings``: its worker spec and Ray address (workers log JSON lines)."""
        return cls(settings.worker, settings.ray_address)

    def preflight(self) -> None:
        """Check in seconds, starting nothing, that Ray imports and that a given cluster (``address`` or
        ``RAY_ADDRESS``) accepts connections, so a wrong address fails before the benchmark is prepared.

        Raises:
            RayUnavailable: Ray missing, or the address unreachable.
        """
        ray_cluster.preflight(self.address)

    async def start(self, setup: WorkerSetup, traffic: TrafficControl, expected_items: int | None) -> None:
        """Get ready for ``expected_items`` items (``None``: unknown) before anything is written: refuse a store the
        workers cannot write to, attach to the cluster (or start the embedded Ray), size the pool, start its actors
        and wait until one has built the setup's solutions.

        The run's limiter actor (:mod:`runner.engine.ray.limiter`) starts last, once the workers have their
        processes.

        Raises:
            ConfigError: a store or response cache in this process's memory (``memory://``), the default local
                storage (no storage given) in a Ray job or on a cluster of several nodes, no node fits one worker, or
                a solution cannot be built on a worker.
            RayUnavailable: Ray cannot start or attach.
        """
        stores = [setup.log_store, *(context.store for context in setup.cells.values())]
        local = next((store for store in stores if store.is_process_local), None)
        if local is not None:
            raise ConfigError(
                f"storage {local.uri!r} lives in this process's memory, where Ray workers cannot write "
                "(their records would be lost); use --sequential, a path, or shared storage such as s3://bucket/run"
            )
        # Ray is imported when a run has work for it, not when the executor is named.
        from runner.engine.ray.backend import RayBackend
        from runner.engine.ray.limiter import RemoteTraffic, check_cache

        self._served = len(setup.pinned)
        # What the configuration alone refuses comes before the cluster is asked anything (a busy cluster's warning
        # stood before this one line).
        check_cache(traffic.cache)
        _check_default_storage(setup.log_store, job=ray_cluster.ray_job())
        # The address was checked by preflight(), which execute_run calls first.
        self._started_ray = ray_cluster.connect(self.address, serving=setup.serves)
        try:
            self.size = ray_cluster.pool_size(self.spec, expected_items)
            nodes = len(ray_cluster.cluster_nodes())
            _check_default_storage(setup.log_store, nodes=nodes)
            if nodes > 1 and setup.log_store.is_local:
                structlog.get_logger("runner").warning(
                    "ray.local_storage", nodes=nodes, storage=setup.log_store.uri,
                    detail="each node writes its records to its own disk; use shared or object storage (s3://...)",
                )
            self._hub = RemoteTraffic(traffic.settings)
            backend = RayBackend(self.spec, setup, self._hub, self.log_format, serves=setup.serves)
            structlog.get_logger("runner").info(
                "ray.pool", workers=self.size, per_worker=ray_cluster.demand(self.spec),
                max_concurrency=self.spec.max_concurrency, cluster=ray_cluster.gcs_address())
            self._pool = WorkerPool(backend, self.spec, self.size, self._record)
            await self._pool.start(setup.name)
            await self._hub.start(traffic.budget, self.size)
            traffic.use(self._hub)
        except BaseException:
            await self.close()
            raise

    async def _record(self, item: WorkItem, attempt: int, fault: Fault) -> str:
        """Store the record of an item its worker could not finish, in its cell's run."""
        assert self._work is not None
        return await record_fault(item, attempt, fault, self._work.context(item.cell))

    async def execute(self, work: Workload) -> None:
        """Execute ``work``'s items on the pool :meth:`start` sized, feeding each cell's progress one
        acknowledgement per item.

        Raises:
            ConfigError: the solution cannot be built on a worker.
            StorageError: a worker cannot write a record (the run stops; finished records stay).
        """
        assert self._pool is not None, "start() first"
        self._work = work
        await self._pool.run(work)

    @property
    def loads(self) -> list[dict[str, Any]]:
        """Every model load of the pool's workers (:meth:`WorkerCells.load
        <runner.engine.worker_cells.WorkerCells.load>`'s report, with the worker's number and node)."""
        return list(self._pool.loads) if self._pool is not None else list(self._loads)

    def details(self) -> dict[str, Any]:
        """With served models: ``replicas`` ready (those of the workers that answered, as they said when they
        started; a worker holds its items while one restarts) and starting (those of the workers not started yet)."""
        served = self._served
        if not served or self._pool is None:
            return {}
        book = self._pool.book
        ready = sum(len(worker.description.get("replicas", [])) for worker in book.workers
                    if worker.state.value in ("ready", "suspect"))
        return {"replicas": {"ready": ready, "starting": len(book.pending) * served}}

    async def close(self) -> None:
        """Kill the pool's actors and the run's limiter actor (its final state stays in the run's
        :class:`~runner.traffic.control.TrafficControl`), and shut Ray down if :meth:`start` initialised it (stops an
        embedded Ray; detaches from a cluster)."""
        if self._pool is not None:
            self._pool.close()
            self.workers, self.deaths = self._pool.book.descriptions, self._pool.book.deaths
            self._loads = list(self._pool.loads)
            self._pool = None
        if self._hub is not None:
            await self._hub.close()
            self._hub = None
        if self._started_ray:
            ray_cluster.shutdown()
            self._started_ray = False


def _check_default_storage(store: ResultStore, *, job: str | None = None, nodes: int = 1) -> None:
    """Refuse the default local storage (no storage given) where its records would be lost or scattered: in a Ray
    job (``job``: its submission id; the driver runs on the head node, in a working directory Ray manages) or on a
    cluster of ``nodes`` nodes (each would write to its own disk).

    Raises:
        ConfigError: one line asking for ``--storage``.
    """
    if not store.uri_is_default or not store.is_local or (job is None and nodes <= 1):
        return
    where = (f"this run is the Ray job {job!r}, so it would land on the head node, in a working directory Ray "
             "manages and may delete" if job is not None
             else f"the Ray cluster has {nodes} nodes, and each would write to its own disk")
    raise ConfigError(
        f"no --storage given, and the default {store.uri} is a local path; {where}: pass --storage with "
        "an object store URL (s3://bucket/prefix, gs://..., az://...) or a path on a filesystem every node mounts"
    )
