"""What every item of one run shares, handed to an executor and, on Ray, to each worker once."""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.core.benchmark import BenchmarkBase
from runner.core.config import RunSettings
from runner.core.solution import SolutionSpec
from runner.engine.traffic import TrafficControl
from runner.storage.store import ResultStore


@dataclass(frozen=True)
class RunContext:
    """The parts of a run that do not change from one item to the next.

    Args:
        benchmark: the benchmark (given to solution factories that ask for ``benchmark=``).
        solution: the solution recipe; each executor (each Ray worker) builds it once.
        store: where records go.
        run_id: the run's id, written into every record.
        settings: the run's settings; :func:`~runner.engine.execute.execute_one` reads ``timeout`` (seconds per
            solution call) and ``solution_retries`` from it.
        traffic: the run's limiter, budget and response cache (default: from ``settings``, nothing spent yet).

    It pickles (the store without live connections), so the Ray executor puts it in the object store once and every
    worker receives it from there.
    """

    benchmark: BenchmarkBase
    solution: SolutionSpec
    store: ResultStore
    run_id: str
    settings: RunSettings = field(default_factory=RunSettings)
    traffic: TrafficControl = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.traffic is None:
            object.__setattr__(self, "traffic", TrafficControl(self.settings))
