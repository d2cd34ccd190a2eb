"""What every item of one run shares, handed to an executor and, on Ray, to each worker once."""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.core.benchmark import BenchmarkBase
from runner.core.config import RunSettings
from runner.core.solution import SolutionSpec
from runner.serving import ReplicaSpec
from runner.storage.response_cache import StoredCache
from runner.storage.store import ResultStore


@dataclass(frozen=True)
class RunContext:
    """The parts of a run that do not change from one item to the next, in every process of the run.

    Args:
        benchmark: the benchmark (given to solution factories that ask for ``benchmark=``).
        solution: the solution recipe; each executor (each Ray worker) builds it once.
        store: where records go.
        run_id: the run's id, written into every record.
        settings: the run's settings; :func:`~runner.engine.item.execute.execute_one` reads ``timeout`` (seconds per
            solution call) and ``solution_retries`` from it.
        cache: the run's response cache (``--cache``), or ``None``.
        replicas: the models the run serves itself: each worker (the driver, when sequential) starts one replica
            of each before it takes items (:class:`runner.serving.ServedModels`).
        model_env: the variables the replicas need from the driver's environment (``HF_TOKEN``...); secrets,
            never written or logged (``repr`` leaves them out).
        weights: model name -> the digest of the weights it serves, where the run can read them (a checkpoint
            folder): the response cache's keys take it (:attr:`RunRequest.weights
            <runner.engine.request.RunRequest.weights>`).

    It pickles (the store and cache without live connections), so the Ray executor puts it in the object store once
    and every worker receives it from there. The run's model traffic (limiter, budget) is per process:
    :class:`~runner.traffic.control.TrafficControl`, which each executor builds or is given.
    """

    benchmark: BenchmarkBase
    solution: SolutionSpec
    store: ResultStore
    run_id: str
    settings: RunSettings = field(default_factory=RunSettings)
    cache: StoredCache | None = None
    replicas: tuple[ReplicaSpec, ...] = ()
    model_env: dict[str, str] = field(default_factory=dict, repr=False)
    weights: dict[str, str] = field(default_factory=dict)
