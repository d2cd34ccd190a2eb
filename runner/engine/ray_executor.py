"""The Ray executor: attach to a cluster (or start an embedded Ray), size a pool of actors, run the plan on it.

Ray is imported only when there is work (by :mod:`runner.engine.ray_pool`), so resuming a finished run costs no
Ray start-up; a given cluster address is checked, and attached to, before the run writes anything.

Example::

    executor = RayExecutor(WorkerSpec(num_gpus=1, max_concurrency=8))    # as many workers as the cluster fits
    executor.preflight()                   # RAY_ADDRESS / address reachable? (attaches to it)
    outcome = await execute_run(request, executor)     # calls executor.execute(plan, context, progress)
    executor.workers                       # each actor's host, pid, node, actor id and assigned resources
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import structlog

from runner import log
from runner.core.config import WorkerSpec
from runner.engine import ray_cluster
from runner.engine.context import RunContext
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress


class RayExecutor:
    """Run items on a pool of Ray actors built from a :class:`WorkerSpec` (see :mod:`runner.engine.ray_pool`).

    Args:
        spec: worker resources and behaviour (``num_workers`` ``None``: as many as the cluster's nodes fit, never
            more than there are items).
        address: the cluster (``host:port`` of the GCS, ``ray://...``, ``auto``); ``None``: ``RAY_ADDRESS`` if
            set, else a new embedded Ray on this machine, shut down when the run ends.
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

    def preflight(self) -> None:
        """Check the cluster before the run writes anything: attach now to a given cluster (``address`` or
        ``RAY_ADDRESS``), which takes a second; an embedded Ray starts only when there is work.

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
        context: RunContext,
        progress: Progress,
    ) -> None:
        """Execute ``items`` on the pool, feeding ``progress`` one acknowledgement per item.

        Raises:
            RayUnavailable: Ray cannot start or attach.
            ConfigError: no node fits one worker, or the solution cannot be built on a worker.
            StorageError: a worker cannot write a record (the run stops; finished records stay).
        """
        plan = iter(items)
        first = next(plan, None)
        if first is None:
            return
        self._connect()
        try:
            from runner.engine.ray_pool import ActorPool

            nodes = len(ray_cluster.cluster_nodes())
            if nodes > 1 and context.store.is_local:
                structlog.get_logger("runner").warning(
                    "ray.local_storage", nodes=nodes, storage=context.store.uri,
                    detail="each node writes its records to its own disk; use shared or object storage (s3://...)",
                )
            pool = ActorPool(self.spec, ray_cluster.pool_size(self.spec, progress.total), self.log_format)
            try:
                await pool.run(itertools.chain([first], plan), context, progress)
            finally:
                pool.close()
                self.workers, self.deaths = pool.workers, pool.deaths
        finally:
            if self._started_ray:
                ray_cluster.shutdown()
                self._started_ray = self._connected = False
