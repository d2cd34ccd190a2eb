"""A worker's model replicas inside a run: the models the run serves itself (:mod:`runner.serving`), started by each
Ray worker (and by the driver when sequential) before it takes items, waited for while one starts again, and
stopped with the worker, their logs copied into the run's ``replicas/``.

Example (what both executors do, through :class:`~runner.engine.worker_cells.WorkerCells`)::

    replicas = WorkerReplicas(specs, model_env, store, gpu_ids=ray.get_gpu_ids(), label="worker-3f9a0c1d")
    replicas.start()                 # blocking; ReplicaStartError (exit 2) before the run writes anything
    await replicas.ready()           # before each batch of items: ReplicaFailed (exit 3), or wait while restarting
    ...
    replicas.stop()                  # and the logs go to <run>/replicas/<label>-<served name>.log
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import structlog

from runner.core.errors import ReplicaFailed
from runner.serving import ReplicaSpec, ReplicaStatus, ServedModels
from runner.storage.store import ResultStore

REPLICAS = "replicas"
"""The folder of the replicas' server logs in the run directory."""


def visible_gpus() -> list[str]:
    """The GPU ids this process may use, from ``CUDA_VISIBLE_DEVICES`` (empty or unset: none, the CPU): the
    driver's, when it serves a model itself (``--sequential``)."""
    return [part.strip() for part in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]


class WorkerReplicas:
    """The replicas of one worker: one of each of ``specs``.

    Args:
        specs: what to serve (a run's :attr:`RunContext.replicas <runner.engine.run_context.RunContext.replicas>`,
            or the model a matrix's worker holds).
        model_env: what the replicas need from the driver's environment (``HF_TOKEN``...).
        store: where the logs go (``replicas/``).
        gpu_ids: the worker's GPUs (``ray.get_gpu_ids()``; the driver's :func:`visible_gpus`); empty: the CPU.
        label: the worker's name in the logs' file names (``worker-<actor id>``, ``driver``).
    """

    def __init__(self, specs: Sequence[ReplicaSpec], model_env: dict[str, str], store: ResultStore,
                 gpu_ids: Sequence[str | int], label: str) -> None:
        self.specs = tuple(specs)
        self.store = store
        self.label = label
        self._dir = Path(tempfile.mkdtemp(prefix="runner-replicas-"))
        self.served = ServedModels(self.specs, [str(gpu) for gpu in gpu_ids], self._dir, env=model_env)
        self._stopped = False

    def start(self) -> None:
        """Start every replica and wait until all are ready (blocking: up to ``--model-startup-timeout``).

        Raises:
            ReplicaStartError: one could not start: out of memory, missing or gated weights, an unknown
                architecture, a bad engine flag... (the server's own line and its log; exit status 2).
        """
        self.served.start()

    async def ready(self) -> None:
        """Return once every replica is ready: at once, or after a restart (items wait, none is charged for it).

        Raises:
            ReplicaFailed: a replica failed past its restarts (exit status 3: the same command resumes).
        """
        self.served.raise_if_failed()
        if self.served.ready():
            return
        longest = max(spec.startup_timeout for spec in self.specs)
        if not await asyncio.to_thread(self.served.wait_ready, longest):
            self.served.raise_if_failed()
            raise ReplicaFailed(f"{self.label}: its model replicas were not ready again within {longest:g} s "
                                "(--model-startup-timeout); the same command resumes")

    def can_swap(self, specs: Sequence[ReplicaSpec]) -> bool:
        """Whether these replicas can load ``specs``' weights in place of theirs (checkpoints of one architecture on
        an engine that reloads in place: :meth:`ServedModels.can_swap <runner.serving.ServedModels.can_swap>`)."""
        return not self._stopped and self.served.can_swap(specs)

    def swap(self, specs: Sequence[ReplicaSpec]) -> None:
        """Load ``specs``' weights in place (see :meth:`can_swap`), blocking until they answer.

        Raises:
            ReplicaStartError: a reload failed; every replica is stopped (start new ones).
        """
        self.served.swap(specs)
        self.specs = tuple(specs)

    def statuses(self) -> list[ReplicaStatus]:
        """Each replica's state, restarts, URL and log."""
        return self.served.statuses()

    def stop(self, keep_logs: bool = True) -> None:
        """Stop every replica and its processes, then (``keep_logs``) copy their logs into the run's ``replicas/``
        (a log that cannot be copied is logged, never raised; ``False`` before the run wrote anything). Safe to call
        twice."""
        if self._stopped:
            return
        self._stopped = True
        self.served.stop()
        store = self.store
        for path in self.served.log_paths if keep_logs else ():
            with contextlib.suppress(FileNotFoundError):
                try:
                    store.write_file(f"{REPLICAS}/{self.label}-{path.name}", path.read_bytes())
                except Exception as exc:  # noqa: BLE001 - a log is for people; it never stops the run
                    structlog.get_logger("runner").warning("replica.log_not_kept", log=str(path),
                                                           error=f"{type(exc).__name__}: {exc}"[:300])
        shutil.rmtree(self._dir, ignore_errors=True)
